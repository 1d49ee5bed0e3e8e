// Restricted unpickler for torch.save state dicts (see torch_pickle.h).
//
// Opcode meanings: CPython Lib/pickletools.py. What torch.save writes: torch/serialization.py (persistent ids) and
// torch/_tensor.py (Tensor.__reduce_ex__ -> torch._utils._rebuild_tensor_v2 / _v3). As in CPython's _pickle.c, a
// MARK fences the stack: an opcode may not pop below the most recent mark.
#include "io/torch_pickle.h"

#include <cstring>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "ferry/core/error.h"

namespace ferry::io::detail {
namespace {

constexpr std::size_t kMaxObjects = 4u << 20;

enum class Kind : uint8_t { None, Bool, Int, Float, Str, Tuple, List, Dict, Global, Storage, Tensor };
enum class G : uint8_t {
  OrderedDict, RebuildTensor, RebuildTensorV2, RebuildTensorV3, RebuildParameter, RebuildParameterWithState,
  RebuildFromTypeV2, TensorType, StorageType, Dtype, Device
};

const char* kind_name(Kind k) {
  static constexpr const char* names[] = {"None", "bool", "int", "float", "str", "tuple",
                                          "list", "dict", "global", "storage", "tensor"};
  return names[static_cast<int>(k)];
}

struct Obj {
  Kind kind = Kind::None;
  G global{};
  DType dtype = DType::U8;
  bool untyped = false;
  int64_t i = 0;                // Int, Bool; Storage: index into storages_; Tensor: index into tensors_
  std::string s;                // Str; Global: "module.name"
  std::vector<uint32_t> items;  // Tuple, List; Dict: key, value, key, value, ...
};

struct GlobalInfo {
  G g;
  DType dtype = DType::U8;
  bool untyped = false;
};

std::optional<GlobalInfo> resolve_global(const std::string& module, const std::string& name) {
  static const std::unordered_map<std::string, GlobalInfo> table = [] {
    std::unordered_map<std::string, GlobalInfo> t = {
        {"collections.OrderedDict", {G::OrderedDict}},
        {"torch._utils._rebuild_tensor", {G::RebuildTensor}},
        {"torch._utils._rebuild_tensor_v2", {G::RebuildTensorV2}},
        {"torch._utils._rebuild_tensor_v3", {G::RebuildTensorV3}},
        {"torch._utils._rebuild_parameter", {G::RebuildParameter}},
        {"torch._utils._rebuild_parameter_with_state", {G::RebuildParameterWithState}},
        {"torch._tensor._rebuild_from_type_v2", {G::RebuildFromTypeV2}},
        {"torch.Tensor", {G::TensorType}},
        {"torch.nn.parameter.Parameter", {G::TensorType}},
        {"torch.device", {G::Device}},
        {"torch.UntypedStorage", {G::StorageType, DType::U8, true}},
        {"torch.storage.UntypedStorage", {G::StorageType, DType::U8, true}},  // how torch 2.x pickles it
    };
    const std::pair<const char*, DType> storages[] = {
        {"FloatStorage", DType::F32}, {"HalfStorage", DType::F16},  {"BFloat16Storage", DType::BF16},
        {"DoubleStorage", DType::F64}, {"LongStorage", DType::I64}, {"IntStorage", DType::I32},
        {"ShortStorage", DType::I16}, {"CharStorage", DType::I8},   {"ByteStorage", DType::U8},
        {"BoolStorage", DType::Bool}};
    for (const auto& [n, d] : storages) t[std::string("torch.") + n] = {G::StorageType, d};
    const std::pair<const char*, DType> dtypes[] = {
        {"float32", DType::F32}, {"float", DType::F32},   {"float16", DType::F16},
        {"half", DType::F16},    {"bfloat16", DType::BF16}, {"float64", DType::F64},
        {"double", DType::F64},  {"int64", DType::I64},   {"long", DType::I64},
        {"int32", DType::I32},   {"int", DType::I32},     {"int16", DType::I16},
        {"short", DType::I16},   {"int8", DType::I8},     {"uint8", DType::U8},
        {"bool", DType::Bool},   {"float8_e4m3fn", DType::F8_E4M3FN}, {"float8_e5m2", DType::F8_E5M2}};
    for (const auto& [n, d] : dtypes) t[std::string("torch.") + n] = {G::Dtype, d};
    return t;
  }();
  auto it = table.find(module + "." + name);
  if (it == table.end()) return std::nullopt;
  return it->second;
}

const char* opcode_name(uint8_t op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 'F': return "FLOAT";
    case 'p': return "PUT";
    case 'g': return "GET";
    case 'd': return "DICT";
    case 'l': return "LIST";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x8b: return "LONG4";
    case 'B': return "BINBYTES";
    case 'C': return "SHORT_BINBYTES";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 0x8e: return "BINBYTES8";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return "unknown";
  }
}

class Unpickler {
 public:
  Unpickler(const uint8_t* data, std::size_t size, const std::string& where) : d_(data), n_(size), where_(where) {}

  PickledStateDict run();

 private:
  [[noreturn]] void fail(const std::string& problem, const std::string& hint = {}) const {
    throw Error(problem + " (pickle byte " + std::to_string(op_pos_) + ")", where_, hint);
  }
  const uint8_t* take(std::size_t k) {
    if (k > n_ - pos_) fail("pickle is truncated");
    const uint8_t* p = d_ + pos_;
    pos_ += k;
    return p;
  }
  uint64_t le(std::size_t k) {
    const uint8_t* p = take(k);
    uint64_t v = 0;
    for (std::size_t i = k; i-- > 0;) v = (v << 8) | p[i];
    return v;
  }
  std::string line() {  // GLOBAL's "module\n" / "name\n"
    const void* nl = std::memchr(d_ + pos_, '\n', n_ - pos_);
    if (!nl) fail("pickle is truncated inside GLOBAL");
    const std::size_t len = static_cast<const uint8_t*>(nl) - (d_ + pos_);
    std::string s(reinterpret_cast<const char*>(take(len)), len);
    take(1);
    return s;
  }

  uint32_t make(Obj o) {
    if (arena_.size() >= kMaxObjects) fail("pickle holds too many objects");
    arena_.push_back(std::move(o));
    return static_cast<uint32_t>(arena_.size() - 1);
  }
  uint32_t make_int(int64_t v) { return make(Obj{.kind = Kind::Int, .i = v}); }
  void push(uint32_t i) {
    if (stack_.size() >= kMaxObjects) fail("pickle stack grows too large");
    stack_.push_back(i);
  }
  std::size_t fence() const { return marks_.empty() ? 0 : marks_.back(); }
  uint32_t pop() {
    if (stack_.size() <= fence()) fail("pickle stack underflow");
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  uint32_t top() const {
    if (stack_.size() <= fence()) fail("pickle stack underflow");
    return stack_.back();
  }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) fail("pickle MARK expected but none is open");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  Obj& at(uint32_t i) { return arena_[i]; }

  void step(uint8_t op);
  void push_global(const std::string& module, const std::string& name);
  uint32_t reduce(uint32_t callable, const std::vector<uint32_t>& args, int depth = 0);
  uint32_t rebuild_tensor(G g, const std::vector<uint32_t>& args);
  uint32_t persistent_load(uint32_t pid);
  void build(uint32_t target, uint32_t state);
  std::vector<int64_t> int_tuple(uint32_t i, const char* what);
  PickledStateDict result(uint32_t root);

  const uint8_t* d_;
  std::size_t n_, pos_ = 0, op_pos_ = 0;
  const std::string& where_;
  bool stopped_ = false;
  std::vector<Obj> arena_;
  std::vector<uint32_t> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<uint64_t, uint32_t> memo_;
  std::vector<PickledStorage> storages_;
  std::vector<PickledTensor> tensors_;
};

void Unpickler::step(uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      const uint8_t v = *take(1);
      if (v > 5) fail("pickle protocol " + std::to_string(v) + " is not supported");
      return;
    }
    case 0x95: {  // FRAME: a length prefix for buffered reading; the content follows as ordinary opcodes
      if (le(8) > n_ - pos_) fail("pickle FRAME runs past the end of the data");
      return;
    }
    case '.': stopped_ = true; return;  // STOP
    case '(': marks_.push_back(stack_.size()); return;  // MARK
    case 'N': push(make(Obj{})); return;
    case 0x88: push(make(Obj{.kind = Kind::Bool, .i = 1})); return;  // NEWTRUE
    case 0x89: push(make(Obj{.kind = Kind::Bool, .i = 0})); return;  // NEWFALSE
    case 'K': push(make_int(static_cast<int64_t>(le(1)))); return;  // BININT1
    case 'M': push(make_int(static_cast<int64_t>(le(2)))); return;  // BININT2
    case 'J': push(make_int(static_cast<int32_t>(static_cast<uint32_t>(le(4))))); return;  // BININT
    case 0x8a: {  // LONG1: n-byte little-endian two's complement
      const std::size_t k = *take(1);
      if (k > 8) fail("pickle integer of " + std::to_string(k) + " bytes does not fit in 64 bits");
      uint64_t v = k ? le(k) : 0;
      if (k > 0 && k < 8 && (v >> (8 * k - 1)) & 1) v |= ~uint64_t{0} << (8 * k);  // sign-extend
      push(make_int(static_cast<int64_t>(v)));
      return;
    }
    case 'G': {  // BINFLOAT: big-endian IEEE double
      const uint8_t* p = take(8);
      uint64_t bits = 0;
      for (int i = 0; i < 8; ++i) bits = (bits << 8) | p[i];
      double f;
      std::memcpy(&f, &bits, sizeof f);
      Obj o{.kind = Kind::Float};
      o.s = std::to_string(f);
      push(make(std::move(o)));
      return;
    }
    case 'X': case 0x8c: case 0x8d: {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
      const uint64_t len = le(op == 'X' ? 4 : op == 0x8c ? 1 : 8);
      if (len > n_ - pos_) fail("pickle is truncated inside a string");
      const auto* p = take(static_cast<std::size_t>(len));
      push(make(Obj{.kind = Kind::Str, .s = std::string(reinterpret_cast<const char*>(p), len)}));
      return;
    }
    case '}': push(make(Obj{.kind = Kind::Dict})); return;   // EMPTY_DICT
    case ']': push(make(Obj{.kind = Kind::List})); return;   // EMPTY_LIST
    case ')': push(make(Obj{.kind = Kind::Tuple})); return;  // EMPTY_TUPLE
    case 't': push(make(Obj{.kind = Kind::Tuple, .items = pop_mark()})); return;  // TUPLE
    case 0x85: case 0x86: case 0x87: {  // TUPLE1..3
      std::vector<uint32_t> items(op - 0x84);
      for (std::size_t k = items.size(); k-- > 0;) items[k] = pop();
      push(make(Obj{.kind = Kind::Tuple, .items = std::move(items)}));
      return;
    }
    case 'q': case 'r': case 0x94: {  // BINPUT, LONG_BINPUT, MEMOIZE
      const uint64_t key = op == 'q' ? le(1) : op == 'r' ? le(4) : memo_.size();
      memo_[key] = top();
      return;
    }
    case 'h': case 'j': {  // BINGET, LONG_BINGET
      const uint64_t key = le(op == 'h' ? 1 : 4);
      auto it = memo_.find(key);
      if (it == memo_.end()) fail("pickle memo has no entry " + std::to_string(key));
      push(it->second);
      return;
    }
    case 'c': {  // GLOBAL
      std::string module = line();
      std::string name = line();
      push_global(module, name);
      return;
    }
    case 0x93: {  // STACK_GLOBAL
      const uint32_t name = pop(), module = pop();
      if (at(name).kind != Kind::Str || at(module).kind != Kind::Str) fail("STACK_GLOBAL needs two strings");
      push_global(at(module).s, at(name).s);
      return;
    }
    case 'Q': push(persistent_load(pop())); return;  // BINPERSID
    case 'R': {  // REDUCE
      const uint32_t args = pop(), callable = pop();
      if (at(args).kind != Kind::Tuple) fail("REDUCE arguments are not a tuple");
      const std::vector<uint32_t> items = at(args).items;
      push(reduce(callable, items));
      return;
    }
    case 'b': {  // BUILD
      const uint32_t state = pop();
      build(top(), state);
      return;
    }
    case 's': case 'u': {  // SETITEM, SETITEMS
      std::vector<uint32_t> kv;
      if (op == 's') {
        const uint32_t v = pop(), k = pop();
        kv = {k, v};
      } else {
        kv = pop_mark();
        if (kv.size() % 2) fail("SETITEMS needs key/value pairs");
      }
      Obj& dict = at(top());
      if (dict.kind != Kind::Dict) fail(std::string("SETITEM(S) on a ") + kind_name(dict.kind) + ", not a dict");
      dict.items.insert(dict.items.end(), kv.begin(), kv.end());
      return;
    }
    case 'a': case 'e': {  // APPEND, APPENDS
      std::vector<uint32_t> vs = op == 'a' ? std::vector<uint32_t>{pop()} : pop_mark();
      Obj& list = at(top());
      if (list.kind != Kind::List) fail(std::string("APPEND(S) on a ") + kind_name(list.kind) + ", not a list");
      list.items.insert(list.items.end(), vs.begin(), vs.end());
      return;
    }
    default: {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02x", op);
      fail(std::string("pickle opcode ") + opcode_name(op) + " (" + hex + ") is not allowed in a checkpoint",
           "ferry reads plain state dicts saved by torch.save; anything else may run code and is refused");
    }
  }
}

void Unpickler::push_global(const std::string& module, const std::string& name) {
  auto info = resolve_global(module, name);
  if (!info)
    fail("global '" + module + "." + name + "' is not allowed in a checkpoint",
         "ferry never runs code from a checkpoint and reads only plain state dicts of tensors; re-save the "
         "weights with torch.save(model.state_dict()) or as safetensors");
  Obj o{.kind = Kind::Global, .global = info->g, .dtype = info->dtype, .untyped = info->untyped};
  o.s = module + "." + name;
  push(make(std::move(o)));
}

std::vector<int64_t> Unpickler::int_tuple(uint32_t i, const char* what) {
  const Obj& o = at(i);
  if (o.kind != Kind::Tuple) fail(std::string(what) + " is a " + kind_name(o.kind) + ", not a tuple of ints");
  std::vector<int64_t> out;
  for (uint32_t e : o.items) {
    if (at(e).kind != Kind::Int) fail(std::string(what) + " holds a " + kind_name(at(e).kind) + ", not an int");
    out.push_back(at(e).i);
  }
  return out;
}

uint32_t Unpickler::persistent_load(uint32_t pid) {
  const Obj& t = at(pid);
  if (t.kind != Kind::Tuple || t.items.size() != 5 || at(t.items[0]).kind != Kind::Str ||
      at(t.items[0]).s != "storage")
    fail("persistent id is not ('storage', type, key, location, numel)");
  const Obj &type = at(t.items[1]), &key = at(t.items[2]), &loc = at(t.items[3]), &numel = at(t.items[4]);
  if (type.kind != Kind::Global || type.global != G::StorageType) fail("persistent id does not name a storage type");
  if (key.kind != Kind::Str || key.s.empty() || key.s.size() > 64 ||
      key.s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != std::string::npos)
    fail("storage key must be a short alphanumeric string");
  if (loc.kind != Kind::Str) fail("storage location must be a string");
  if (numel.kind != Kind::Int || numel.i < 0) fail("storage size must be a non-negative int");
  storages_.push_back({key.s, type.dtype, type.untyped, numel.i, loc.s});
  return make(Obj{.kind = Kind::Storage, .i = static_cast<int64_t>(storages_.size() - 1)});
}

uint32_t Unpickler::rebuild_tensor(G g, const std::vector<uint32_t>& args) {
  // _rebuild_tensor(storage, offset, size, stride)
  // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, backward_hooks[, metadata])
  // _rebuild_tensor_v3(storage, offset, size, stride, requires_grad, backward_hooks, dtype[, metadata])
  const std::size_t want = g == G::RebuildTensor ? 4 : g == G::RebuildTensorV2 ? 6 : 7;
  if (args.size() != want && !(g != G::RebuildTensor && args.size() == want + 1))
    fail("tensor rebuild takes " + std::to_string(want) + " arguments, got " + std::to_string(args.size()));
  const Obj& storage = at(args[0]);
  if (storage.kind != Kind::Storage) fail("tensor rebuild's first argument is not a storage");
  if (at(args[1]).kind != Kind::Int) fail("tensor storage offset is not an int");
  PickledTensor t;
  t.storage = static_cast<std::size_t>(storage.i);
  t.offset = at(args[1]).i;
  t.size = int_tuple(args[2], "tensor size");
  t.stride = int_tuple(args[3], "tensor stride");
  const PickledStorage& s = storages_[t.storage];
  t.dtype = s.dtype;
  if (g == G::RebuildTensorV3) {
    const Obj& dt = at(args[6]);
    if (dt.kind != Kind::Global || dt.global != G::Dtype) fail("_rebuild_tensor_v3's dtype is not a torch dtype");
    if (!s.untyped) fail("_rebuild_tensor_v3 expects an UntypedStorage");
    t.dtype = dt.dtype;
  } else if (s.untyped) {
    fail("an UntypedStorage needs _rebuild_tensor_v3 (which names the dtype)");
  }
  if (g != G::RebuildTensor) {
    if (at(args[4]).kind != Kind::Bool) fail("tensor requires_grad is not a bool");
    if (at(args[5]).kind != Kind::Dict) fail("tensor backward_hooks is not a dict");
  }
  tensors_.push_back(std::move(t));
  return make(Obj{.kind = Kind::Tensor, .i = static_cast<int64_t>(tensors_.size() - 1)});
}

uint32_t Unpickler::reduce(uint32_t callable, const std::vector<uint32_t>& args, int depth) {
  const Obj& f = at(callable);
  if (f.kind != Kind::Global) fail(std::string("REDUCE calls a ") + kind_name(f.kind) + ", not an allowed global");
  auto tensor_arg = [&](std::size_t n) {
    if (args.size() != n || at(args[0]).kind != Kind::Tensor)
      fail(f.s + " expects a tensor and " + std::to_string(n - 1) + " more arguments");
    return args[0];
  };
  switch (f.global) {
    case G::OrderedDict:
      if (!args.empty()) fail("collections.OrderedDict is only accepted with no arguments");
      return make(Obj{.kind = Kind::Dict});
    case G::RebuildTensor:
    case G::RebuildTensorV2:
    case G::RebuildTensorV3:
      return rebuild_tensor(f.global, args);
    case G::RebuildParameter: return tensor_arg(3);
    case G::RebuildParameterWithState: return tensor_arg(4);
    case G::RebuildFromTypeV2: {
      // (func, new_type, args, state): a plain tensor or Parameter with no Python state.
      if (depth > 0 || args.size() != 4) fail("_rebuild_from_type_v2 expects (func, type, args, state)");
      const Obj& type = at(args[1]);
      if (type.kind != Kind::Global || type.global != G::TensorType)
        fail("_rebuild_from_type_v2 only rebuilds torch.Tensor or torch.nn.Parameter");
      const Obj& state = at(args[3]);
      if (!(state.kind == Kind::None || (state.kind == Kind::Dict && state.items.empty())))
        fail("tensor carries Python attributes (a tensor subclass?); ferry reads plain tensors only");
      if (at(args[2]).kind != Kind::Tuple) fail("_rebuild_from_type_v2 arguments are not a tuple");
      const std::vector<uint32_t> inner = at(args[2]).items;
      return reduce(args[0], inner, depth + 1);
    }
    case G::Device: {
      if (args.empty() || args.size() > 2 || at(args[0]).kind != Kind::Str) fail("torch.device expects a string");
      std::string s = at(args[0]).s;
      if (args.size() == 2 && at(args[1]).kind == Kind::Int) s += ":" + std::to_string(at(args[1]).i);
      return make(Obj{.kind = Kind::Str, .s = std::move(s)});
    }
    case G::TensorType:
    case G::StorageType:
    case G::Dtype:
      break;
  }
  fail("global '" + f.s + "' cannot be called in a checkpoint");
}

void Unpickler::build(uint32_t target, uint32_t state) {
  const Obj &t = at(target), &s = at(state);
  // An nn.Module state dict is an OrderedDict with a `_metadata` attribute (module versions), set by BUILD.
  if (t.kind == Kind::Dict && (s.kind == Kind::Dict || s.kind == Kind::Tuple || s.kind == Kind::None)) return;
  if (t.kind == Kind::Tensor && (s.kind == Kind::None || (s.kind == Kind::Dict && s.items.empty()))) return;
  fail(std::string("BUILD sets state on a ") + kind_name(t.kind) + "; only dicts and plain tensors are accepted");
}

PickledStateDict Unpickler::result(uint32_t root) {
  const Obj& dict = at(root);
  if (dict.kind != Kind::Dict)
    fail(std::string("the checkpoint holds a ") + kind_name(dict.kind) + ", not a state dict",
         "save model.state_dict(), not the model object");
  PickledStateDict out;
  out.storages = storages_;
  std::unordered_set<std::string> seen;
  for (std::size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    const Obj& key = at(dict.items[k]);
    if (key.kind != Kind::Str) fail(std::string("state dict key is a ") + kind_name(key.kind) + ", not a string");
    if (!seen.insert(key.s).second) fail("state dict names \"" + key.s + "\" twice");
  }
  for (std::size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    const Obj &key = at(dict.items[k]), &value = at(dict.items[k + 1]);
    if (value.kind != Kind::Tensor)
      throw Error(std::string("value is a ") + kind_name(value.kind) + ", not a tensor", where_ + ": " + key.s,
                  value.kind == Kind::Dict ? "the file nests a state dict under this key; ferry reads flat state "
                                             "dicts (save model.state_dict() itself)"
                                           : "ferry reads state dicts whose values are all tensors");
    PickledTensor t = tensors_[static_cast<std::size_t>(value.i)];
    t.name = key.s;
    out.tensors.push_back(std::move(t));
  }
  return out;
}

PickledStateDict Unpickler::run() {
  if (n_ > kMaxPickleBytes)
    throw Error("data.pkl of " + std::to_string(n_) + " bytes exceeds the " + std::to_string(kMaxPickleBytes) +
                    "-byte limit",
                where_);
  while (!stopped_) {
    op_pos_ = pos_;
    if (pos_ >= n_) fail("pickle ends without STOP");
    step(*take(1));
  }
  if (stack_.size() != 1 || !marks_.empty()) fail("pickle does not end with exactly one object");
  return result(stack_.back());
}

}  // namespace

PickledStateDict unpickle_state_dict(const uint8_t* data, std::size_t size, const std::string& where) {
  return Unpickler(data, size, where).run();
}

}  // namespace ferry::io::detail
