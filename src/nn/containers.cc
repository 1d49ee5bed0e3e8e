// ModuleList and Sequential: numbered children; Sequential threads one value through them.
#include "ferry/nn/containers.h"

#include "ferry/core/error.h"

namespace ferry::nn {

ModuleList::ModuleList(std::vector<std::shared_ptr<Module>> modules) {
  for (auto& m : modules) push_back(std::move(m));
}

Module& ModuleList::operator[](std::size_t i) const {
  if (i >= size())
    throw Error("index " + std::to_string(i) + " out of range for " + type_name() + " of " + std::to_string(size()) +
                " modules");
  return *children()[i].module;
}

void ModuleList::throw_wrong_type(std::size_t i) const {
  throw Error("item " + std::to_string(i) + " is a " + (*this)[i].type_name() + ", not the type requested",
              type_name());
}

Sequential::Sequential(std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules) {
  for (auto& [name, m] : named_modules) register_module(std::move(name), std::move(m));
}

Value Sequential::forward(const Args& args) {
  if (children().empty()) return args[0];  // nn.Sequential() is the identity
  Value out = (*children().front().module)(args);
  for (std::size_t i = 1; i < children().size(); ++i) out = (*children()[i].module)(Args{std::move(out)});
  return out;
}

}  // namespace ferry::nn
