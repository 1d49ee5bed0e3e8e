// Containers: ModuleList (numbered children, no forward) and Sequential (children called in turn), as in PyTorch.
// Children are named "0", "1", ... so their tensors read "layers.3.mlp.up_proj.weight".
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ferry/nn/module.h"

namespace ferry::nn {

/// torch.nn.ModuleList. Has no forward (calling it throws ferry::Error); index it and call the items.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  explicit ModuleList(std::vector<std::shared_ptr<Module>> modules);

  std::string type_name() const override { return "ModuleList"; }

  /// Appends as child str(size()); returns it typed.
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    register_module(std::to_string(size()), module);
    return module;
  }
  std::size_t size() const noexcept { return children().size(); }
  /// Child i; throws ferry::Error when out of range.
  Module& operator[](std::size_t i) const;
  /// Child i as M; throws ferry::Error when out of range or of another type.
  template <class M>
  M& at(std::size_t i) const {
    auto* m = dynamic_cast<M*>(&(*this)[i]);
    if (m == nullptr) throw_wrong_type(i);
    return *m;
  }

 private:
  [[noreturn]] void throw_wrong_type(std::size_t i) const;
};

/// torch.nn.Sequential: forward calls the children in order, the first with the given args, each next one with
/// the previous output as its only positional argument. Children are numbered, or named when built from
/// (name, module) pairs (nn.Sequential(OrderedDict(...))).
class Sequential : public ModuleList {
 public:
  Sequential() = default;
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules) : ModuleList(std::move(modules)) {}
  explicit Sequential(std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules);

  std::string type_name() const override { return "Sequential"; }
  Value forward(const Args& args) override;
  using Module::operator();
};

}  // namespace ferry::nn
