// config.json, read once: typed access to the keys a Hugging Face architecture uses, with transformers' defaults
// for absent keys, and errors that name the file and the key.
//
// Each model family turns a ConfigJson into its own config struct (LlamaConfig, GPT2Config, ...) with the HF key
// names; this class only knows JSON, the keys every family shares (architectures, model_type, dtype) and the RoPE
// settings, which transformers spells three ways (rope_parameters in transformers ≥ 5; rope_theta + rope_scaling
// before; "type" for "rope_type" in the oldest files).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>  // nlohmann::json

#include "ferry/core/dtype.h"
#include "ferry/nn/rotary.h"  // RopeParameters

namespace ferry::models {

/// A parsed config.json. A value type; share it read-only across threads.
///
///   ConfigJson config = ConfigJson::read("TinyLlama-1.1B");          // the folder, or the file itself
///   int64_t layers = config.require_int("num_hidden_layers");
///   double eps = config.get_float("rms_norm_eps", 1e-6);            // HF default when absent or null
class ConfigJson {
 public:
  /// Reads `folder/config.json`, or `path` itself when it names a file. Throws ferry::Error naming the path when
  /// it is missing, unreadable, not JSON, or not a JSON object.
  static ConfigJson read(const std::filesystem::path& folder_or_file);
  /// Parses config text; `where` names it in errors.
  static ConfigJson parse(std::string_view text, std::string where = "config.json");
  /// Wraps an already-built JSON object (tests, benchmarks, configs made in code).
  static ConfigJson from_json(nlohmann::json json, std::string where = "config.json");

  const nlohmann::json& json() const noexcept { return json_; }
  const std::string& where() const noexcept { return where_; }

  /// Key aliases, as transformers' attribute_map: {"hidden_size", "n_embd"} makes get_int("n_embd", ...) also
  /// find "hidden_size". Set by a family before reading its keys.
  void set_aliases(std::vector<std::pair<std::string, std::string>> aliases) { aliases_ = std::move(aliases); }

  /// Present with a non-null value (directly or through an alias).
  bool has(std::string_view key) const;

  /// The value of `key`, or `fallback` when absent or null. A value of the wrong JSON type (a string for an int,
  /// 64.5 for an int, true for a number) throws ferry::Error naming the key and the value.
  int64_t get_int(std::string_view key, int64_t fallback) const;
  double get_float(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key, std::string fallback) const;
  std::optional<int64_t> get_optional_int(std::string_view key) const;

  /// The value of a key the architecture cannot guess; absent or null throws ferry::Error
  /// ("config.json: missing required key \"hidden_size\" (LlamaForCausalLM)").
  int64_t require_int(std::string_view key) const;

  /// architectures[0] ("LlamaForCausalLM"), or nullopt when the key is absent, null or an empty list. The
  /// auto-model registry falls back on model_type (auto_model.h: resolve_architecture).
  std::optional<std::string> architecture() const;
  /// model_type, or "" when absent.
  std::string model_type() const;
  /// The dtype the weights were saved in: "dtype" (transformers ≥ 5) or "torch_dtype"; nullopt when absent,
  /// null or "auto". Throws ferry::Error for a name ferry does not know.
  std::optional<DType> dtype() const;

  /// RoPE settings: rope_parameters, else rope_scaling plus top-level rope_theta (default `default_theta`);
  /// original_max_position_embeddings defaults to `max_position_embeddings` as transformers does.
  nn::RopeParameters rope_parameters(int64_t max_position_embeddings, double default_theta = 10000.0) const;

  /// "config.json: " + what, for errors raised by families.
  [[noreturn]] void fail(const std::string& problem, const std::string& hint = {}) const;

 private:
  const nlohmann::json* find(std::string_view key) const;
  std::string where_;
  nlohmann::json json_;
  std::vector<std::pair<std::string, std::string>> aliases_;
};

}  // namespace ferry::models
