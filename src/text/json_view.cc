// JsonView (see json_view.h): typed access to tokenizer.json with errors that name the field.
#include "text/json_view.h"

#include "ferry/core/error.h"
#include "text/unicode.h"

namespace ferry::text::detail {

JsonView::JsonView(const nlohmann::json& value, std::string source, std::string path)
    : value_(&value), source_(std::move(source)), path_(std::move(path)) {}

std::string JsonView::where() const { return path_.empty() ? source_ : source_ + ": " + path_; }

void JsonView::fail(const std::string& problem, const std::string& hint) const { throw Error(problem, where(), hint); }

const char* JsonView::type_name(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::string: return "a string";
    case nlohmann::json::value_t::boolean: return "a boolean";
    case nlohmann::json::value_t::number_float: return "a floating-point number";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return "an integer";
    default: return "an unexpected JSON value";
  }
}

void JsonView::expect_object() const {
  if (!value_->is_object()) fail(std::string("expected an object, got ") + type_name(*value_));
}

void JsonView::expect_array() const {
  if (!value_->is_array()) fail(std::string("expected an array, got ") + type_name(*value_));
}

bool JsonView::has(std::string_view key) const {
  expect_object();
  const auto it = value_->find(key);
  return it != value_->end() && !it->is_null();
}

JsonView JsonView::at(std::string_view key) const {
  expect_object();
  const std::string child = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  const auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) {
    throw Error("missing field \"" + std::string(key) + "\"", source_ + ": " + child,
                "is this a tokenizer.json written by Hugging Face tokenizers?");
  }
  return JsonView(*it, source_, child);
}

std::optional<JsonView> JsonView::get(std::string_view key) const {
  expect_object();
  const auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonView(*it, source_, path_.empty() ? std::string(key) : path_ + "." + std::string(key));
}

std::size_t JsonView::size() const {
  expect_array();
  return value_->size();
}

JsonView JsonView::operator[](std::size_t i) const {
  expect_array();
  return JsonView((*value_)[i], source_, path_ + "[" + std::to_string(i) + "]");
}

std::string JsonView::as_string() const {
  if (!value_->is_string()) fail(std::string("expected a string, got ") + type_name(*value_));
  const auto& s = value_->get_ref<const std::string&>();
  if (!is_valid_utf8(s)) fail("string is not valid UTF-8");
  return s;
}

bool JsonView::as_bool() const {
  if (!value_->is_boolean()) fail(std::string("expected true or false, got ") + type_name(*value_));
  return value_->get<bool>();
}

std::uint64_t JsonView::as_u64() const {
  if (!value_->is_number_integer() || (value_->is_number_integer() && !value_->is_number_unsigned() &&
                                       value_->get<std::int64_t>() < 0)) {
    fail(std::string("expected a non-negative integer, got ") + type_name(*value_));
  }
  return value_->get<std::uint64_t>();
}

std::uint32_t JsonView::as_u32() const {
  const std::uint64_t v = as_u64();
  if (v > 0xFFFFFFFFull) fail("integer " + std::to_string(v) + " does not fit in 32 bits");
  return static_cast<std::uint32_t>(v);
}

std::string JsonView::as_char() const {
  const std::string s = as_string();
  std::size_t i = 0;
  if (!s.empty()) next_code_point(s, i);
  if (s.empty() || i != s.size()) fail("expected a single character, got \"" + s + "\"");
  return s;
}

std::string JsonView::string_or(std::string_view key, std::string fallback) const {
  const auto v = get(key);
  return v ? v->as_string() : std::move(fallback);
}

bool JsonView::bool_or(std::string_view key, bool fallback) const {
  const auto v = get(key);
  return v ? v->as_bool() : fallback;
}

}  // namespace ferry::text::detail
