// Post-processors of tokenizer.json ("post_processor"): add the special tokens a model expects around
// an encoded sequence (BOS/EOS, [CLS]/[SEP]). Hugging Face: tokenizers/src/processors. Supported:
// TemplateProcessing, ByteLevel (offsets only: no effect on ids), RobertaProcessing, BertProcessing and
// Sequence. ferry encodes single sequences; the "pair" template is validated but not used.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "text/json_view.h"

namespace ferry::text::detail {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  /// Rewrites the ids of one encoded sequence; adds nothing unless add_special_tokens.
  virtual void process(std::vector<std::int32_t>& ids, bool add_special_tokens) const = 0;
};

std::unique_ptr<PostProcessor> parse_post_processor(const JsonView& json);

}  // namespace ferry::text::detail
