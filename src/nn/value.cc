// Value / Args plumbing and the recursive walks hooks use on them (send_to_device, find_device), after
// Accelerate's utils/operations.py.
#include "ferry/nn/value.h"

#include <algorithm>

namespace ferry::nn {

namespace {

std::string join_keys(const Dict& d) {
  std::string out;
  for (const auto& [k, v] : d) {
    (void)v;
    if (!out.empty()) out += ", ";
    out += "\"" + k + "\"";
  }
  return out.empty() ? "none" : out;
}

[[noreturn]] void throw_kind(Value::Kind want, const Value& got) {
  throw Error("expected " + std::string(Value::kind_name(want)) + ", got " + got.describe(), "forward argument",
              "check what the caller passes to this module");
}

bool skipped(const std::string& key, const std::vector<std::string>& skip_keys) {
  return std::find(skip_keys.begin(), skip_keys.end(), key) != skip_keys.end();
}

}  // namespace

// ---- Dict ----------------------------------------------------------------------------------------------------

Dict::Dict(std::initializer_list<Item> items) {
  for (const auto& item : items) set(item.first, item.second);
}

void Dict::set(std::string key, Value value) {
  if (Value* v = find(key)) {
    *v = std::move(value);
    return;
  }
  items_.emplace_back(std::move(key), std::move(value));
}

bool Dict::contains(std::string_view key) const noexcept { return find(key) != nullptr; }

const Value* Dict::find(std::string_view key) const noexcept {
  for (const auto& item : items_)
    if (item.first == key) return &item.second;
  return nullptr;
}

Value* Dict::find(std::string_view key) noexcept {
  for (auto& item : items_)
    if (item.first == key) return &item.second;
  return nullptr;
}

const Value& Dict::at(std::string_view key) const {
  if (const Value* v = find(key)) return *v;
  throw Error("no entry \"" + std::string(key) + "\" (keys: " + join_keys(*this) + ")");
}

Value& Dict::at(std::string_view key) {
  if (Value* v = find(key)) return *v;
  throw Error("no entry \"" + std::string(key) + "\" (keys: " + join_keys(*this) + ")");
}

bool Dict::erase(std::string_view key) {
  auto it = std::find_if(items_.begin(), items_.end(), [&](const Item& i) { return i.first == key; });
  if (it == items_.end()) return false;
  items_.erase(it);
  return true;
}

std::vector<std::string> Dict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& item : items_) out.push_back(item.first);
  return out;
}

// ---- Object --------------------------------------------------------------------------------------------------

void Object::throw_type_mismatch(const char* wanted) const {
  throw Error(std::string("object holds ") + (ptr_ ? type_name_ : std::string("nothing")) + ", not the requested " +
              wanted);
}

// ---- Value ---------------------------------------------------------------------------------------------------

std::string_view Value::kind_name(Kind k) noexcept {
  switch (k) {
    case Kind::None: return "none";
    case Kind::Tensor: return "Tensor";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::Bool: return "bool";
    case Kind::String: return "string";
    case Kind::List: return "list";
    case Kind::Dict: return "dict";
    case Kind::Object: return "object";
  }
  return "?";
}

std::string Value::describe() const {
  switch (kind()) {
    case Kind::None: return "none";
    case Kind::Tensor: return std::get<Tensor>(v_).str();
    case Kind::Int: return "int " + std::to_string(std::get<int64_t>(v_));
    case Kind::Float: return "float " + std::to_string(std::get<double>(v_));
    case Kind::Bool: return std::get<bool>(v_) ? "bool true" : "bool false";
    case Kind::String: return "string \"" + std::get<std::string>(v_) + "\"";
    case Kind::List: return "list(" + std::to_string(std::get<List>(v_).size()) + ")";
    case Kind::Dict: return "dict(" + join_keys(std::get<Dict>(v_)) + ")";
    case Kind::Object: return "object " + std::get<Object>(v_).type_name();
  }
  return "?";
}

const Tensor& Value::tensor() const {
  if (!is_tensor()) throw_kind(Kind::Tensor, *this);
  return std::get<Tensor>(v_);
}
Tensor& Value::tensor() {
  if (!is_tensor()) throw_kind(Kind::Tensor, *this);
  return std::get<Tensor>(v_);
}
int64_t Value::to_int() const {
  if (!is_int()) throw_kind(Kind::Int, *this);
  return std::get<int64_t>(v_);
}
double Value::to_float() const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(v_));
  if (!is_float()) throw_kind(Kind::Float, *this);
  return std::get<double>(v_);
}
bool Value::to_bool() const {
  if (!is_bool()) throw_kind(Kind::Bool, *this);
  return std::get<bool>(v_);
}
const std::string& Value::str() const {
  if (!is_string()) throw_kind(Kind::String, *this);
  return std::get<std::string>(v_);
}
const List& Value::list() const {
  if (!is_list()) throw_kind(Kind::List, *this);
  return std::get<List>(v_);
}
List& Value::list() {
  if (!is_list()) throw_kind(Kind::List, *this);
  return std::get<List>(v_);
}
const Dict& Value::dict() const {
  if (!is_dict()) throw_kind(Kind::Dict, *this);
  return std::get<Dict>(v_);
}
Dict& Value::dict() {
  if (!is_dict()) throw_kind(Kind::Dict, *this);
  return std::get<Dict>(v_);
}
const Object& Value::object() const {
  if (!is_object()) throw_kind(Kind::Object, *this);
  return std::get<Object>(v_);
}

// ---- Args ----------------------------------------------------------------------------------------------------

const Value& Args::operator[](std::size_t i) const {
  if (i >= args.size())
    throw Error("positional argument " + std::to_string(i) + " missing (" + std::to_string(args.size()) + " given)",
                "forward arguments");
  return args[i];
}

Value& Args::operator[](std::size_t i) {
  if (i >= args.size())
    throw Error("positional argument " + std::to_string(i) + " missing (" + std::to_string(args.size()) + " given)",
                "forward arguments");
  return args[i];
}

const Tensor* Args::tensor_arg(std::size_t i, std::string_view name) const {
  const Value* v = i < args.size() ? &args[i] : kwargs.find(name);
  if (v == nullptr || v->is_none()) return nullptr;
  return &v->tensor();
}

// ---- walks ---------------------------------------------------------------------------------------------------

Value send_to_device(const Value& value, Device device, const std::vector<std::string>& skip_keys) {
  switch (value.kind()) {
    case Value::Kind::Tensor: return Value(value.tensor().to(device));
    case Value::Kind::List: {
      List out;
      out.reserve(value.list().size());
      for (const Value& v : value.list()) out.push_back(send_to_device(v, device, skip_keys));
      return Value(std::move(out));
    }
    case Value::Kind::Dict: {
      Dict out;
      for (const auto& [k, v] : value.dict()) out.set(k, skipped(k, skip_keys) ? v : send_to_device(v, device, skip_keys));
      return Value(std::move(out));
    }
    default: return value;  // scalars, strings, opaque objects: nothing to move
  }
}

Args send_to_device(const Args& args, Device device, const std::vector<std::string>& skip_keys) {
  Args out;
  out.args.reserve(args.args.size());
  for (const Value& v : args.args) out.args.push_back(send_to_device(v, device));
  for (const auto& [k, v] : args.kwargs)
    out.kwargs.set(k, skipped(k, skip_keys) ? v : send_to_device(v, device, skip_keys));
  return out;
}

std::optional<Device> find_device(const Value& value) {
  switch (value.kind()) {
    case Value::Kind::Tensor: return value.tensor().device();
    case Value::Kind::List:
      for (const Value& v : value.list())
        if (auto d = find_device(v)) return d;
      return std::nullopt;
    case Value::Kind::Dict:
      for (const auto& [k, v] : value.dict()) {
        (void)k;
        if (auto d = find_device(v)) return d;
      }
      return std::nullopt;
    default: return std::nullopt;
  }
}

std::optional<Device> find_device(const Args& args) {
  for (const Value& v : args.args)
    if (auto d = find_device(v)) return d;
  for (const auto& [k, v] : args.kwargs) {
    (void)k;
    if (auto d = find_device(v)) return d;
  }
  return std::nullopt;
}

}  // namespace ferry::nn
