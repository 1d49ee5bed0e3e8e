// OffloadedWeightsLoader and PrefixedDataset: the weight maps hooks read offloaded weights from
// (see include/ferry/io/offload.h).
#include "ferry/core/error.h"
#include "ferry/core/mapped_file.h"
#include "ferry/io/offload.h"

namespace fs = std::filesystem;

namespace ferry::io {

OffloadedWeightsLoader::OffloadedWeightsLoader(StateDict state_dict, std::optional<fs::path> save_folder,
                                               std::optional<OffloadIndex> index, Device device)
    : state_dict_(std::move(state_dict)), device_(device) {
  if (save_folder) save_folder_ = *save_folder;
  if (index) index_ = std::move(*index);
  else if (save_folder) index_ = load_offload_index(*save_folder);
  // O(N + M): Accelerate scans the list of RAM keys once per index key (accelerate#4280).
  all_keys_ = state_dict_.keys();
  for (const auto& [name, entry] : index_)
    if (!state_dict_.contains(name)) all_keys_.push_back(name);
}

bool OffloadedWeightsLoader::contains(const std::string& key) const {
  return state_dict_.contains(key) || index_.count(key) > 0;
}

namespace {

// The tensor's name inside the safetensors file an entry points into: the index key unless the entry names another.
const std::string& name_in_file(const OffloadEntry& info, const std::string& key) {
  return info.weight_name.empty() ? key : info.weight_name;
}

}  // namespace

SafetensorsFile OffloadedWeightsLoader::safetensors_of(const OffloadEntry& info) const {
  fs::path path = info.safetensors_file;
  if (path.is_relative() && !save_folder_.empty()) path = save_folder_ / path;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = open_files_.find(path);
  if (it == open_files_.end()) it = open_files_.emplace(path, SafetensorsFile::open(path)).first;
  return it->second;
}

OffloadedWeightsLoader::DiskTensor OffloadedWeightsLoader::locate(const std::string& key,
                                                                  const OffloadEntry& info) const {
  if (info.in_safetensors()) {
    const SafetensorsFile st = safetensors_of(info);
    const std::string& name = name_in_file(info, key);
    const SafetensorsEntry* e = st.find(name);
    if (!e)
      throw Error("no tensor of this name in the file", st.path().string() + ": " + name,
                  "offload index entry " + key);
    return {FileRange{st.path(), st.data_start() + e->begin, e->end - e->begin}, e->shape, e->dtype};
  }
  if (info.in_data_file()) {
    if (!info.dtype || !info.shape) throw Error("offload entry lacks a dtype or shape", key);
    const std::uint64_t want = dtype_nbytes(*info.dtype, shape_numel(*info.shape));
    std::error_code ec;
    const std::uint64_t size = fs::file_size(info.data_file, ec);
    if (ec) throw Error("cannot read the offloaded weight: " + ec.message(), info.data_file);
    if (info.data_offset > size || want > size - info.data_offset)
      throw Error("the index puts " + std::to_string(want) + " bytes at offset " + std::to_string(info.data_offset) +
                      ", past the end of the file (" + std::to_string(size) + " bytes)",
                  info.data_file + ": " + key, "the file changed since the model was loaded; load it again");
    return {FileRange{info.data_file, info.data_offset, want}, *info.shape, *info.dtype};
  }
  if (save_folder_.empty()) throw Error("weight is offloaded to disk but no offload folder was given", key);
  if (!info.dtype || !info.shape) throw Error("offload entry lacks a dtype or shape", key);
  const fs::path file = save_folder_ / (key + ".dat");
  const std::uint64_t want = dtype_nbytes(*info.dtype, shape_numel(*info.shape));
  std::error_code ec;
  const std::uint64_t size = fs::file_size(file, ec);
  if (ec) throw Error("cannot read the offloaded weight: " + ec.message(), file.string());
  if (size != want)
    throw Error("file holds " + std::to_string(size) + " bytes, but the index says " + shape_str(*info.shape) + " " +
                    std::string(numpy_dtype_name(*info.dtype)) + " (" + std::to_string(want) + " bytes)",
                file.string(), "the offload folder is incomplete or corrupt; offload the weights again");
  return {FileRange{file, 0, want}, *info.shape, *info.dtype};
}

Tensor OffloadedWeightsLoader::get(const std::string& key) const { return read(key, false).tensor; }

OwnedTensor OffloadedWeightsLoader::get_to_keep(const std::string& key) const { return read(key, true); }

// get(); keep: the caller keeps the tensor, so a staged read hands over its buffer (owned then).
OwnedTensor OffloadedWeightsLoader::read(const std::string& key, bool keep) const {
  if (const Tensor* t = state_dict_.find(key)) return {*t, false};
  auto it = index_.find(key);
  if (it == index_.end())
    throw Error("no weight of this name in memory or in the offload folder", key,
                save_folder_.empty() ? "" : "offload folder: " + save_folder_.string());
  const OffloadEntry& info = it->second;
  Tensor t;
  bool owned = false;
  if (reader_) {
    // Staged: the bytes come from disk into the reader's pool; a cast reads the staging buffer, which is then freed.
    const DiskTensor d = locate(key, info);
    t = reader_->take(d.range, d.shape, d.dtype, keep);
    if (info.in_safetensors() && info.dtype && *info.dtype != d.dtype) t = t.to(*info.dtype);  // a copy of its own
    owned = keep && device_.is_cpu();
  } else if (info.in_safetensors()) {
    const SafetensorsFile st = safetensors_of(info);
    const std::string& name = name_in_file(info, key);
    try {
      t = info.dtype ? st.get(name, *info.dtype) : st.get(name);
    } catch (const Error& e) {
      throw e.with_context("offload index entry " + key);
    }
  } else if (info.in_data_file()) {
    // A window of the mapped file (page cache), as a safetensors entry is.
    const DiskTensor d = locate(key, info);
    auto file = MappedFile::open(d.range.path);
    t = Tensor::from_storage(Storage::view(std::move(file), d.range.offset, d.range.length), 0, d.shape, d.dtype);
  } else {
    if (save_folder_.empty()) throw Error("weight is offloaded to disk but no offload folder was given", key);
    t = load_offloaded_weight(save_folder_ / (key + ".dat"), info);
  }
  return {t.to(device_), owned};
}

bool OffloadedWeightsLoader::prefetch(const std::string& key) const noexcept {
  if (state_dict_.contains(key)) return false;
  auto it = index_.find(key);
  if (it == index_.end()) return false;
  const OffloadEntry& info = it->second;
  try {
    if (reader_) return reader_->prefetch(locate(key, info).range);
    if (info.in_safetensors()) return safetensors_of(info).prefetch(name_in_file(info, key));
    if (info.in_data_file()) {
      const DiskTensor d = locate(key, info);
      return MappedFile::open(d.range.path)->populate(d.range.offset, d.range.length);
    }
    if (save_folder_.empty()) return false;
    // get() maps the .dat anew each time: reading it through a mapping of our own fills the page cache the way
    // get()'s faults would (readahead, large folios), and get()'s mapping then finds every page there.
    const auto file = MappedFile::open(save_folder_ / (key + ".dat"));
    return file->populate(0, file->size());
  } catch (const std::exception&) {
    return false;  // advice only: a file that cannot be opened here is reported by get(), with its reason
  }
}

PrefixedDataset::PrefixedDataset(std::shared_ptr<const WeightsMap> dataset, std::string prefix)
    : dataset_(std::move(dataset)), prefix_(std::move(prefix)) {
  if (!dataset_) throw Error("PrefixedDataset needs a dataset");
  // Whole dotted components: "a.1" must not reach "a.10.weight", so the prefix always ends in '.'.
  if (!prefix_.empty() && prefix_.back() != '.') prefix_ += '.';
}

std::vector<std::string> PrefixedDataset::keys() const {
  std::vector<std::string> out;
  for (const auto& k : dataset_->keys())
    if (k.size() > prefix_.size() && k.compare(0, prefix_.size(), prefix_) == 0) out.push_back(k.substr(prefix_.size()));
  return out;
}

AliasedWeightsMap::AliasedWeightsMap(std::shared_ptr<const WeightsMap> dataset, std::map<std::string, std::string> aliases)
    : dataset_(std::move(dataset)) {
  if (!dataset_) throw Error("AliasedWeightsMap needs a dataset");
  for (auto& [alias, key] : aliases) {
    if (dataset_->contains(alias)) continue;  // the dataset's own tensor wins
    if (!dataset_->contains(key))
      throw Error("alias of a weight that is not there either", alias + " -> " + key,
                  "every alias must name a key of the weights map");
    aliases_.emplace(alias, std::move(key));
  }
}

const std::string& AliasedWeightsMap::resolve(const std::string& key) const {
  auto it = aliases_.find(key);
  return it == aliases_.end() ? key : it->second;
}

std::vector<std::string> AliasedWeightsMap::keys() const {
  std::vector<std::string> out = dataset_->keys();
  for (const auto& [alias, key] : aliases_) out.push_back(alias);
  return out;
}

}  // namespace ferry::io
