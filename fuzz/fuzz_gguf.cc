// Fuzzes the GGUF parser with whole files: any input must either throw ferry::Error or yield tensors that lie
// inside the input, aligned, without overlapping, and whose quantized blocks dequantize without reading past them.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "ferry/core/error.h"
#include "ferry/io/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto g = ferry::io::GgufFile::parse(std::span<const uint8_t>(data, size), "fuzz");
    for (const auto& t : g.tensors()) {
      if (t.offset > size || t.nbytes > size - t.offset || t.offset % g.alignment() != 0) std::abort();
      const auto info = ferry::ggml_type_info(t.type);
      const int64_t n = t.numel();
      if (info.dequantizable && n > 0 && n <= (1 << 16)) {
        std::vector<float> out(static_cast<std::size_t>(n));
        ferry::dequantize(t.type, g.tensor_bytes(t).data(), out.data(), n);
      }
    }
  } catch (const ferry::Error&) {
  }
  return 0;
}
