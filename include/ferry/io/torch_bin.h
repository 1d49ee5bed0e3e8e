// PyTorch .bin checkpoints (pytorch_model.bin, pytorch_model-0000N-of-0000M.bin): the zip format torch.save has
// written since PyTorch 1.6, read without Python and without trusting the file.
//
// The archive holds "<name>/data.pkl" (the pickled state dict) and one entry "<name>/data/<key>" per storage.
// data.pkl is read by a restricted unpickler that knows only the opcodes and globals a state dict needs, so loading
// can never run code; anything else is refused with an error naming the global or opcode (see src/io/torch_pickle.h).
// Stored (uncompressed) entries — what torch.save writes, 64-byte aligned — become zero-copy read-only views of the
// mapped file (an entry that is not 8-byte aligned, as other zip tools may write, is copied once); compressed
// entries are inflated into owned memory. Tensors saved with strides are materialised
// contiguously; tensors that shared a storage in Python share a Storage here (tied weights stay tied), and two
// names for the same view give Tensor::is_same() handles. Bytes of stored entries are not CRC-checked (that would
// read the whole file up front); inflated entries are.
//
// Deliberately left out: the legacy pre-1.6 (non-zip) format and TorchScript archives (refused with a hint),
// big-endian archives, and tensors of dtypes ferry lacks (complex, quantized, uint16..64).
#pragma once

#include <filesystem>
#include <optional>

#include "ferry/core/dtype.h"
#include "ferry/io/state_dict.h"

namespace ferry::io {

/// Loads every tensor of a torch.save'd state dict, in the pickle's order, to cpu. Float tensors are converted to
/// `dtype` when given. Throws ferry::Error naming the file (and tensor, global or opcode) on any problem.
/// Accelerate: load_state_dict (for .bin files: torch.load(weights_only=True, map_location="cpu"))
StateDict load_torch_bin(const std::filesystem::path& path, std::optional<DType> dtype = std::nullopt);

/// True when the file starts like a zip archive (what torch.save writes).
bool looks_like_zip(const std::filesystem::path& path);

}  // namespace ferry::io
