// Tied weights and offloading: a checkpoint or offload folder stores a tied weight once, under one of its names
// (lm_head.weight is usually absent, model.embed_tokens.weight present), while the hook of every module sharing it
// asks the weights map for it by that module's own name. dispatch_model, cpu_offload and disk_offload therefore
// read offloaded weights through with_tied_names(), which answers every name of a tied group.
#pragma once

#include <memory>

#include "ferry/io/offload.h"
#include "ferry/nn/module.h"

namespace ferry {

/// `weights_map`, where each name of a tied group of `model` (nn::find_tied_parameters) that the map lacks is read
/// as the group's first name the map has. Returns `weights_map` itself when nothing needs an alias (or it is null).
/// Example: model with lm_head.weight tied to model.embed_tokens.weight, offload index holding only the latter:
///   auto w = with_tied_names(model, loader);   w->get("lm_head.weight")  // the embedding matrix
std::shared_ptr<const io::WeightsMap> with_tied_names(const nn::Module& model,
                                                      std::shared_ptr<const io::WeightsMap> weights_map);

}  // namespace ferry
