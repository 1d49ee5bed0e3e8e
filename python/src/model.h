// The object behind ferry's Python model classes: a loaded (or skeleton) language model — decoder-only or
// encoder-decoder — with what text::from_pretrained found beside it (tokenizer, chat template, EOS ids); the device
// map it was dispatched with is the model's own (LanguageModel::hf_device_map).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ferry/big_modeling/device_map.h"
#include "ferry/big_modeling/dispatch.h"
#include "ferry/models/config.h"
#include "ferry/models/language_model.h"
#include "ferry/nn/module.h"
#include "ferry/text/chat_template.h"
#include "ferry/text/tokenizer.h"

namespace ferry::python {

struct Model {
  std::shared_ptr<models::LanguageModel> model;
  std::optional<models::ConfigJson> config;
  std::optional<text::Tokenizer> tokenizer;
  std::shared_ptr<const text::ChatTemplate> chat_template;  // the model's, when it has one
  std::vector<text::TokenId> eos_token_ids;
  bool device_map_given = false;  // from_pretrained had a device_map: hf_device_map is set (transformers' rule)
  std::string name_or_path;
  /// Mixtures of experts with experts on disk: their cache in RAM (statistics), else null or without classes.
  std::shared_ptr<ExpertCache> expert_cache;
  /// Forwards and generations of one model run one at a time (hooks and caches are not shared-safe); taken with the
  /// GIL released, so a thread waiting for it never blocks Python.
  std::shared_ptr<std::mutex> mutex = std::make_shared<std::mutex>();

  nn::Module& module() const { return *model; }
  const models::LanguageModelInfo& info() const { return model->model_info(); }
  /// transformers' hf_device_map: the map the model was dispatched with, when from_pretrained was given one.
  std::optional<DeviceMap> hf_device_map() const {
    return device_map_given ? model->hf_device_map() : std::nullopt;
  }
};

}  // namespace ferry::python
