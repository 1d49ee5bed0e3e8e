// JsonView: typed, path-aware access to tokenizer.json. Every accessor either returns a value of the
// expected JSON type or throws a ferry::Error whose `where` names the file and the field path
// ("tokenizer.json: model.merges[12]"), so a malformed file is reported precisely.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::text::detail {

class JsonView {
 public:
  /// `source` names the file ("tokenizer.json"); `path` the field ("" for the root).
  JsonView(const nlohmann::json& value, std::string source, std::string path = {});

  const nlohmann::json& raw() const { return *value_; }
  const std::string& path() const { return path_; }
  /// "source: path", the `where` of errors about this value.
  std::string where() const;

  bool is_null() const { return value_->is_null(); }
  /// True when `key` is present and not null (the value must be an object).
  bool has(std::string_view key) const;
  /// A required member; throws "missing field" when absent or null.
  JsonView at(std::string_view key) const;
  /// An optional member: nullopt when absent or null.
  std::optional<JsonView> get(std::string_view key) const;

  /// Calls fn(key, JsonView) for every member of an object (in key order: nlohmann::json sorts objects).
  template <class Fn>
  void for_each_member(Fn&& fn) const {
    expect_object();
    for (auto it = value_->begin(); it != value_->end(); ++it) {
      fn(it.key(), JsonView(it.value(), source_, path_.empty() ? it.key() : path_ + "." + it.key()));
    }
  }

  /// Array access (the value must be an array).
  std::size_t size() const;
  JsonView operator[](std::size_t i) const;

  std::string as_string() const;
  bool as_bool() const;
  std::uint32_t as_u32() const;
  std::uint64_t as_u64() const;
  /// A JSON string holding exactly one Unicode character (serde's `char`); returned as UTF-8.
  std::string as_char() const;

  /// Member helpers with defaults for optional fields.
  std::string string_or(std::string_view key, std::string fallback) const;
  bool bool_or(std::string_view key, bool fallback) const;

  void expect_object() const;
  void expect_array() const;

  /// Throws ferry::Error(problem, where(), hint).
  [[noreturn]] void fail(const std::string& problem, const std::string& hint = {}) const;

 private:
  static const char* type_name(const nlohmann::json& v);
  const nlohmann::json* value_;
  std::string source_;
  std::string path_;
};

}  // namespace ferry::text::detail
