// The object behind ferry's Python model classes: a loaded (or skeleton) causal or encoder-decoder model, its
// tokenizer when the folder has one, the ids that end generation, and the device map it was dispatched with.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/device_map.h"
#include "ferry/models/causal_lm.h"
#include "ferry/models/config.h"
#include "ferry/models/seq2seq_lm.h"
#include "ferry/nn/module.h"
#include "ferry/text/chat_template.h"
#include "ferry/text/tokenizer.h"

namespace ferry::python {

struct Model {
  std::shared_ptr<models::CausalLM> causal;    // exactly one of these two is set
  std::shared_ptr<models::Seq2SeqLM> seq2seq;
  std::optional<models::ConfigJson> config;
  std::optional<text::Tokenizer> tokenizer;
  std::shared_ptr<const text::ChatTemplate> chat_template;  // the folder's, when it has one
  std::vector<text::TokenId> eos_token_ids;
  std::optional<DeviceMap> device_map;         // transformers' hf_device_map; unset for a resident load
  std::string name_or_path;
  /// Forwards and generations of one model run one at a time (hooks and caches are not shared-safe); taken with the
  /// GIL released, so a thread waiting for it never blocks Python.
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();

  nn::Module& module() const { return causal ? static_cast<nn::Module&>(*causal) : static_cast<nn::Module&>(*seq2seq); }
  std::string block_class() const { return causal ? causal->info().block_class : seq2seq->info().block_class; }
};

}  // namespace ferry::python
