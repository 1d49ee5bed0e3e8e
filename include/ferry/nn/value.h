// Value and Args: what a module's forward takes and returns, so that hooks can see and rewrite every tensor.
//
// PyTorch forwards take `*args, **kwargs` of any Python objects; Accelerate's hooks walk them to move tensors
// (send_to_device) and to find the input device (find_device). Value is the C++ stand-in: none, Tensor, int,
// float, bool, string, list, ordered dict, or an opaque shared object with a type tag (a KV cache). Args are the
// positional Values plus the named ones, in call order.
//
// Ownership: a Value owns its lists and dicts (copying a Value copies them); tensors inside are handles (copying
// shares bytes); an Object is shared (copying a Value shares the object). Not synchronised.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <typeindex>
#include <typeinfo>
#include <utility>
#include <variant>
#include <vector>

#include "ferry/core/device.h"
#include "ferry/core/error.h"
#include "ferry/core/tensor.h"

namespace ferry::nn {

class Value;

/// A Python list/tuple of Values.
using List = std::vector<Value>;

/// An insertion-ordered string-keyed map of Values (a Python dict / HF ModelOutput). Lookup is linear: these
/// hold a handful of entries.
class Dict {
 public:
  using Item = std::pair<std::string, Value>;

  Dict() = default;
  Dict(std::initializer_list<Item> items);

  /// Inserts or replaces (a replaced key keeps its position, like a Python dict).
  void set(std::string key, Value value);
  bool contains(std::string_view key) const noexcept;
  /// nullptr when absent.
  const Value* find(std::string_view key) const noexcept;
  Value* find(std::string_view key) noexcept;
  /// Throws ferry::Error naming the key and the keys present when absent.
  const Value& at(std::string_view key) const;
  Value& at(std::string_view key);
  /// Removes the key if present; returns whether it was.
  bool erase(std::string_view key);

  std::size_t size() const noexcept;
  bool empty() const noexcept;
  std::vector<Item>::const_iterator begin() const noexcept;
  std::vector<Item>::const_iterator end() const noexcept;
  std::vector<Item>::iterator begin() noexcept;
  std::vector<Item>::iterator end() noexcept;
  std::vector<std::string> keys() const;

 private:
  std::vector<Item> items_;
};

/// An opaque shared object passed through forwards untouched (a KV cache, an attention mask builder). The tag
/// is both the C++ type (checked on get) and a readable name for error messages.
class Object {
 public:
  Object() = default;
  template <class T>
  static Object make(std::shared_ptr<T> ptr, std::string type_name) {
    Object o;
    o.ptr_ = std::move(ptr);
    o.type_ = std::type_index(typeid(T));
    o.type_name_ = std::move(type_name);
    return o;
  }
  /// The object as T; throws ferry::Error when it holds another type (or nothing).
  template <class T>
  std::shared_ptr<T> get() const {
    if (!ptr_ || type_ != std::type_index(typeid(T))) throw_type_mismatch(typeid(T).name());
    return std::static_pointer_cast<T>(ptr_);
  }
  template <class T>
  bool holds() const noexcept {
    return ptr_ && type_ == std::type_index(typeid(T));
  }
  const std::string& type_name() const noexcept { return type_name_; }
  const void* address() const noexcept { return ptr_.get(); }

 private:
  [[noreturn]] void throw_type_mismatch(const char* wanted) const;
  std::shared_ptr<void> ptr_;
  std::type_index type_ = std::type_index(typeid(void));
  std::string type_name_;
};

class Value {
 public:
  enum class Kind : uint8_t { None, Tensor, Int, Float, Bool, String, List, Dict, Object };

  Value() = default;  // none
  Value(std::nullptr_t) {}
  Value(Tensor t) : v_(std::move(t)) {}
  Value(bool b) : v_(b) {}
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  Value(T i) : v_(static_cast<int64_t>(i)) {}
  template <std::floating_point T>
  Value(T f) : v_(static_cast<double>(f)) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(std::string_view s) : v_(std::string(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List l) : v_(std::move(l)) {}
  Value(Dict d) : v_(std::move(d)) {}
  Value(Object o) : v_(std::move(o)) {}
  template <class T>
  Value(T*) = delete;  // no accidental pointer -> bool

  Kind kind() const noexcept { return static_cast<Kind>(v_.index()); }
  bool is_none() const noexcept { return kind() == Kind::None; }
  bool is_tensor() const noexcept { return kind() == Kind::Tensor; }
  bool is_int() const noexcept { return kind() == Kind::Int; }
  bool is_float() const noexcept { return kind() == Kind::Float; }
  bool is_bool() const noexcept { return kind() == Kind::Bool; }
  bool is_string() const noexcept { return kind() == Kind::String; }
  bool is_list() const noexcept { return kind() == Kind::List; }
  bool is_dict() const noexcept { return kind() == Kind::Dict; }
  bool is_object() const noexcept { return kind() == Kind::Object; }

  /// Typed access; each throws ferry::Error ("expected a Tensor, got int") on the wrong kind.
  const Tensor& tensor() const;
  Tensor& tensor();
  int64_t to_int() const;
  /// A float, or an int widened to double.
  double to_float() const;
  bool to_bool() const;
  const std::string& str() const;
  const List& list() const;
  List& list();
  const Dict& dict() const;
  Dict& dict();
  const Object& object() const;

  /// "none", "Tensor", "int", "float", "bool", "string", "list", "dict", "object".
  static std::string_view kind_name(Kind k) noexcept;
  /// Short description for messages: "Tensor[f32 [2, 3] cpu]", "list(3)", "object KVCache", ...
  std::string describe() const;

 private:
  std::variant<std::monostate, Tensor, int64_t, double, bool, std::string, List, Dict, Object> v_;
};

/// The arguments of a forward: positional Values (`*args`) and named ones (`**kwargs`, in call order).
/// `Args{x, y}` makes two positional arguments; use Args(List, Dict) or with() for named ones.
struct Args {
  List args;
  Dict kwargs;

  Args() = default;
  Args(std::initializer_list<Value> positional) : args(positional) {}
  Args(List positional, Dict named) : args(std::move(positional)), kwargs(std::move(named)) {}

  std::size_t size() const noexcept { return args.size(); }
  /// Positional argument i; throws ferry::Error when there are fewer.
  const Value& operator[](std::size_t i) const;
  Value& operator[](std::size_t i);
  /// Named argument, or nullptr.
  const Value* kwarg(std::string_view name) const noexcept { return kwargs.find(name); }
  /// Chainable: Args{ids}.with("attention_mask", mask).
  Args& with(std::string name, Value value) {
    kwargs.set(std::move(name), std::move(value));
    return *this;
  }
  /// The tensor given at position i or under `name` (HF forwards accept both); nullptr if neither is given.
  const Tensor* tensor_arg(std::size_t i, std::string_view name) const;
};

// Dict's inline members need Value complete.
inline std::size_t Dict::size() const noexcept { return items_.size(); }
inline bool Dict::empty() const noexcept { return items_.empty(); }
inline std::vector<Dict::Item>::const_iterator Dict::begin() const noexcept { return items_.begin(); }
inline std::vector<Dict::Item>::const_iterator Dict::end() const noexcept { return items_.end(); }
inline std::vector<Dict::Item>::iterator Dict::begin() noexcept { return items_.begin(); }
inline std::vector<Dict::Item>::iterator Dict::end() noexcept { return items_.end(); }

/// Every tensor in `value` moved to `device`, recursing into lists and dicts; dict entries whose key is in
/// `skip_keys` are kept as they are (at any depth). Objects and scalars are returned unchanged.
/// Accelerate: send_to_device(tensor, device, skip_keys=...)
Value send_to_device(const Value& value, Device device, const std::vector<std::string>& skip_keys = {});
/// Positional arguments are all moved; named arguments whose name is in `skip_keys` are kept (and skip_keys
/// apply inside nested dicts), as AlignDevicesHook.pre_forward does.
Args send_to_device(const Args& args, Device device, const std::vector<std::string>& skip_keys = {});

/// The device of the first tensor found (depth first, positional before named); nullopt when there is none.
/// Accelerate: find_device
std::optional<Device> find_device(const Value& value);
std::optional<Device> find_device(const Args& args);

}  // namespace ferry::nn
