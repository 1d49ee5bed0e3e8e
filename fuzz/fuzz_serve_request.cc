// Fuzz target: the JSON body of POST /v1/chat/completions and /v1/completions (ferry serve's parser). Any input must
// parse or be refused with a 400 ApiError — never another exception, a crash, a leak or a hang.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "serve/openai_request.h"
#include "serve/openai_response.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (auto endpoint : {ferry::serve::Endpoint::ChatCompletions, ferry::serve::Endpoint::Completions}) {
    try {
      const auto r = ferry::serve::parse_completion_request(body, endpoint);
      // What the server does next with the parsed fields that reach a response.
      ferry::serve::ResponseHeader h{"id", 0, r.model, endpoint};
      (void)ferry::serve::sse_event(ferry::serve::text_chunk(h, r.model, true));
      if (r.messages.is_array()) (void)r.messages.dump();
    } catch (const ferry::serve::ApiError& e) {
      if (e.status() != 400) __builtin_trap();
      (void)e.body().dump();
    }
  }
  return 0;
}
