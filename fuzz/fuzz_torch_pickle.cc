// Fuzzes the restricted unpickler with raw data.pkl bytes: any input either throws ferry::Error or yields tensors
// that refer to storages it also returned.
#include <cstdint>
#include <cstdlib>

#include "ferry/core/error.h"
#include "io/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto sd = ferry::io::detail::unpickle_state_dict(data, size, "fuzz");
    for (const auto& t : sd.tensors)
      if (t.storage >= sd.storages.size()) std::abort();
  } catch (const ferry::Error&) {
  }
  return 0;
}
