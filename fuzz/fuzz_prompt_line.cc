// libFuzzer target for prompt lines (`ferry generate -i PROMPTS`): parse_prompt_line must never throw (a bad line
// is an error value), and applying a parsed line's settings must either succeed or throw ferry::Error.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "ferry/core/error.h"
#include "ferry/text/prompt_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  ferry::text::PromptLine p;
  try {
    p = ferry::text::parse_prompt_line(line, 1);
  } catch (...) {
    std::abort();  // parse_prompt_line promises not to throw
  }
  if (!p.error.empty() && (p.text || p.ids)) std::abort();
  ferry::text::SamplingOptions sampling;
  ferry::text::StopCriteria stop;
  try {
    ferry::text::apply_generation_settings(p.settings, sampling, stop);
  } catch (const ferry::Error&) {
  }
  return 0;
}
