// StateDict: ordered name -> tensor map (see include/ferry/io/state_dict.h).
#include "ferry/io/state_dict.h"

#include "ferry/core/error.h"

namespace ferry::io {

void StateDict::insert(std::string name, Tensor tensor) {
  if (index_.find(std::string_view(name)) != index_.end())
    throw Error("tensor name appears twice", name, "each tensor name must be unique in a state dict");
  index_.emplace(name, items_.size());
  items_.emplace_back(std::move(name), std::move(tensor));
}

void StateDict::set(std::string name, Tensor tensor) {
  auto it = index_.find(std::string_view(name));
  if (it != index_.end()) {
    items_[it->second].second = std::move(tensor);
    return;
  }
  insert(std::move(name), std::move(tensor));
}

bool StateDict::erase(std::string_view name) {
  auto it = index_.find(name);
  if (it == index_.end()) return false;
  const std::size_t pos = it->second;
  index_.erase(it);
  items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(pos));
  for (std::size_t i = pos; i < items_.size(); ++i) index_[items_[i].first] = i;
  return true;
}

const Tensor* StateDict::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &items_[it->second].second;
}

const Tensor& StateDict::at(std::string_view name) const {
  if (const Tensor* t = find(name)) return *t;
  throw Error("no tensor of this name in the state dict", std::string(name));
}

std::vector<std::string> StateDict::keys() const {
  std::vector<std::string> out;
  out.reserve(items_.size());
  for (const auto& [name, t] : items_) out.push_back(name);
  return out;
}

std::size_t StateDict::total_bytes() const noexcept {
  std::size_t n = 0;
  for (const auto& [name, t] : items_) n += t.nbytes();
  return n;
}

}  // namespace ferry::io
