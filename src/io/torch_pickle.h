// A restricted unpickler for the data.pkl of a torch.save'd state dict. Loading a .bin can never run code.
//
// Python's pickle is a small stack machine whose GLOBAL + REDUCE opcodes call arbitrary functions; that is why
// torch.load(weights_only=False) on a downloaded file is remote code execution. This unpickler implements only the
// opcodes torch.save emits (protocol 2, plus the protocol 3/4 spellings of the same operations) and resolves only
// the globals a state dict needs, each to a fixed, data-only meaning:
//   collections.OrderedDict                     -> an (ordered) dict
//   torch._utils._rebuild_tensor{,_v2,_v3}      -> a tensor record (storage, offset, size, stride[, dtype])
//   torch._utils._rebuild_parameter{,_with_state}, torch._tensor._rebuild_from_type_v2 (with torch.Tensor or
//   torch.nn.parameter.Parameter)               -> the tensor inside
//   torch.*Storage, torch[.storage].UntypedStorage -> storage types inside persistent ids
//   torch.<dtype> (float8_e4m3fn, ...)          -> dtypes (for _rebuild_tensor_v3)
//   torch.device                                -> a string
// Any other global (os.system, builtins.eval, a model class) or opcode is refused with an error that names it.
// Objects live in an arena and are referred to by index, so reference cycles built by a hostile pickle cannot leak
// or recurse; sizes are capped. Internal to ferry_io (the fuzz target calls it directly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/core/dtype.h"
#include "ferry/core/tensor.h"

namespace ferry::io::detail {

/// A storage as named by torch.save's persistent id ('storage', torch.FloatStorage, key, location, numel):
/// the bytes are the zip entry "<archive>/data/<key>", numel counts elements of `dtype` (bytes for UntypedStorage).
struct PickledStorage {
  std::string key;
  DType dtype = DType::U8;
  bool untyped = false;
  int64_t numel = 0;
  std::string location;  // "cpu", "cuda:0", ...: informational, everything loads to the host
};

/// One tensor of the state dict: a strided view (in elements) of a storage.
struct PickledTensor {
  std::string name;
  std::size_t storage = 0;  // index into PickledStateDict::storages
  DType dtype = DType::F32;
  int64_t offset = 0;
  Shape size;
  std::vector<int64_t> stride;
};

struct PickledStateDict {
  std::vector<PickledStorage> storages;  // one per persistent id, in order of appearance (keys may repeat)
  std::vector<PickledTensor> tensors;    // in the dict's order
};

/// Largest data.pkl accepted; a state dict's pickle is a few bytes per tensor.
inline constexpr std::size_t kMaxPickleBytes = 256u << 20;

/// Runs the restricted unpickler over `data` and returns the flat state dict it describes (a dict or OrderedDict
/// of name -> tensor). Throws ferry::Error(where) naming any refused global or opcode, malformed or truncated
/// input, and any value that is not a tensor.
PickledStateDict unpickle_state_dict(const uint8_t* data, std::size_t size, const std::string& where);

}  // namespace ferry::io::detail
