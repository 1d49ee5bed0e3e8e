// config.json reading: typed getters with transformers' defaults, required keys, aliases (attribute_map), the saved
// dtype and RoPE parameters in all three spellings transformers has used.
#include "ferry/models/config.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "ferry/core/error.h"

namespace ferry::models {

namespace {

std::string brief(const nlohmann::json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

const char* json_kind(const nlohmann::json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

}  // namespace

ConfigJson ConfigJson::read(const std::filesystem::path& folder_or_file) {
  std::error_code ec;
  const bool is_dir = std::filesystem::is_directory(folder_or_file, ec);
  const std::filesystem::path path = is_dir ? folder_or_file / "config.json" : folder_or_file;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // NotFound only when the path is not there (exists() clears ec then); a file we may not read is InvalidValue.
    const bool missing = !std::filesystem::exists(path, ec) && !ec;
    throw Error(missing ? ErrorKind::NotFound : ErrorKind::InvalidValue, "cannot open config.json", path.string(),
                is_dir ? "Is this a Hugging Face model folder? It must contain config.json next to the weights."
                       : "Pass the model folder (the one holding config.json and the weights).");
  }
  std::ostringstream text;
  text << in.rdbuf();
  return parse(text.str(), path.string());
}

ConfigJson ConfigJson::parse(std::string_view text, std::string where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("not valid JSON: ") + e.what(), where);
  }
  return from_json(std::move(j), std::move(where));
}

ConfigJson ConfigJson::from_json(nlohmann::json json, std::string where) {
  if (!json.is_object())
    throw Error(std::string("config must be a JSON object, got ") + json_kind(json), where);
  ConfigJson c;
  c.json_ = std::move(json);
  c.where_ = std::move(where);
  return c;
}

const nlohmann::json* ConfigJson::find(std::string_view key) const {
  auto it = json_.find(key);
  if (it != json_.end() && !it->is_null()) return &*it;
  for (const auto& [a, b] : aliases_) {
    std::string_view other = key == a ? std::string_view(b) : key == b ? std::string_view(a) : std::string_view();
    if (other.empty()) continue;
    auto jt = json_.find(other);
    if (jt != json_.end() && !jt->is_null()) return &*jt;
  }
  return nullptr;
}

void ConfigJson::fail(const std::string& problem, const std::string& hint) const { throw Error(problem, where_, hint); }

bool ConfigJson::has(std::string_view key) const { return find(key) != nullptr; }

int64_t ConfigJson::get_int(std::string_view key, int64_t fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    fail("\"" + std::string(key) + "\" = " + brief(*v) + " is too large");
  if (!v->is_number_integer())
    fail("\"" + std::string(key) + "\" must be an integer, got " + json_kind(*v) + " " + brief(*v));
  return v->get<int64_t>();
}

double ConfigJson::get_float(std::string_view key, double fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number()) fail("\"" + std::string(key) + "\" must be a number, got " + json_kind(*v) + " " + brief(*v));
  return v->get<double>();
}

bool ConfigJson::get_bool(std::string_view key, bool fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean())
    fail("\"" + std::string(key) + "\" must be true or false, got " + json_kind(*v) + " " + brief(*v));
  return v->get<bool>();
}

std::string ConfigJson::get_string(std::string_view key, std::string fallback) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return fallback;
  if (!v->is_string()) fail("\"" + std::string(key) + "\" must be a string, got " + json_kind(*v) + " " + brief(*v));
  return v->get<std::string>();
}

std::optional<int64_t> ConfigJson::get_optional_int(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return get_int(key, 0);
}

int64_t ConfigJson::require_int(std::string_view key) const {
  if (!has(key)) {
    const auto arch = architecture();
    fail("missing required key \"" + std::string(key) + "\"" + (arch ? " (" + *arch + ")" : std::string()),
         "transformers would silently use its default here; ferry refuses, because the weights' shapes depend on "
         "it. Add the key to config.json.");
  }
  return get_int(key, 0);
}

std::optional<std::string> ConfigJson::architecture() const {
  auto it = json_.find("architectures");
  if (it == json_.end() || it->is_null()) return std::nullopt;
  if (!it->is_array()) fail("\"architectures\" must be a list of class names, got " + brief(*it));
  if (it->empty()) return std::nullopt;
  if (!(*it)[0].is_string()) fail("\"architectures\"[0] must be a class name string, got " + brief((*it)[0]));
  return (*it)[0].get<std::string>();
}

std::string ConfigJson::model_type() const { return get_string("model_type", ""); }

std::optional<DType> ConfigJson::dtype() const {
  // transformers ≥ 5 writes "dtype"; earlier versions "torch_dtype".
  const char* key = has("dtype") ? "dtype" : "torch_dtype";
  const std::string name = get_string(key, "");
  if (name.empty() || name == "auto") return std::nullopt;
  try {
    return parse_dtype(name);
  } catch (const Error& e) {
    fail("\"" + std::string(key) + "\": " + e.problem());
  }
}

nn::RopeParameters ConfigJson::rope_parameters(int64_t max_position_embeddings, double default_theta) const {
  // Priority as in transformers' convert_rope_params_to_dict: rope_parameters, else rope_scaling; values inside
  // the dict win over top-level rope_theta, which wins over the class default.
  const nlohmann::json* dict = find("rope_parameters");
  std::string dict_name = "rope_parameters";
  if (dict == nullptr) {
    dict = find("rope_scaling");
    dict_name = "rope_scaling";
  }
  nn::RopeParameters p;
  p.rope_theta = get_float("rope_theta", default_theta);
  p.original_max_position_embeddings = get_int("original_max_position_embeddings", max_position_embeddings);
  if (dict == nullptr) return p;
  if (!dict->is_object()) fail("\"" + dict_name + "\" must be an object, got " + brief(*dict));
  for (const char* nested : {"full_attention", "sliding_attention"}) {
    if (dict->contains(nested))
      fail("\"" + dict_name + "\" is given per layer type (\"" + nested + "\"); ferry's families use one setting");
  }
  // Read the dict's keys through a ConfigJson view so type errors name "rope_parameters.factor".
  ConfigJson sub = from_json(*dict, where_ + ": " + dict_name);
  p.rope_type = sub.get_string("rope_type", sub.get_string("type", "default"));
  p.rope_theta = sub.get_float("rope_theta", p.rope_theta);
  p.factor = sub.get_float("factor", p.factor);
  p.low_freq_factor = sub.get_float("low_freq_factor", p.low_freq_factor);
  p.high_freq_factor = sub.get_float("high_freq_factor", p.high_freq_factor);
  if (!has("original_max_position_embeddings"))
    p.original_max_position_embeddings =
        sub.get_int("original_max_position_embeddings", p.original_max_position_embeddings);
  if (p.rope_type == "frequency_factors") {  // ferry's own, for GGUF files (nn/rotary.h)
    const nlohmann::json* factors = sub.find("factors");
    if (factors == nullptr || !factors->is_array())
      fail("\"" + dict_name + "\" of type \"frequency_factors\" needs \"factors\", a list of numbers");
    for (const auto& f : *factors) {
      if (!f.is_number()) fail("\"" + dict_name + ".factors\" must hold numbers, got " + brief(f));
      p.frequency_factors.push_back(f.get<double>());
    }
  }
  if ((p.rope_type == "linear" || p.rope_type == "llama3") && !sub.has("factor"))
    fail("\"" + dict_name + "\" of type \"" + p.rope_type + "\" needs \"factor\"");
  if (p.rope_type == "llama3") {
    for (const char* k : {"low_freq_factor", "high_freq_factor"})
      if (!sub.has(k)) fail("\"" + dict_name + "\" of type \"llama3\" needs \"" + k + "\"");
  }
  return p;
}

}  // namespace ferry::models
