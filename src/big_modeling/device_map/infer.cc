// infer_auto_device_map: Accelerate's planning loop (utils/modeling.py), step for step, so that plans are
// interchangeable with Accelerate's. Departures are marked where they happen; see auto_device_map.h for the list.
//
// The loop pops the queue (root's direct parameters, children, direct buffers) and tries the current device:
//   fits (with the owners of its tied parameters)  -> place it, and them;
//   only the tied owners are too much              -> split the first splittable owner and retry;
//   does not fit                                   -> split it unless it is a tensor, childless or no-split;
//   otherwise (maybe after fallback_allocation)    -> close this device (a main device keeps its reserve) and
//                                                     retry on the next one.
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "ferry/big_modeling/token_reads.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/nn/module.h"
#include "ferry/nn/tied.h"  // find_tied_parameters
#include "planner.h"

namespace ferry::detail {
namespace {

struct DeviceState {
  Device device;
  std::optional<int64_t> budget;  // nullopt: disk, unlimited (Accelerate ignores a disk budget too)
  bool main = false;              // keeps back the largest remaining layer
  int64_t used = 0;     // placed weights, plus `kept` once the device is closed (Accelerate's accounting)
  int64_t kept = 0;     // the reserve a main device kept free when it was closed
  int64_t buffers = 0;  // buffers of modules placed here, which stay on the execution device
};

std::string join_names(const std::vector<PlanItem>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "'" : ", '") + i.name + "'";
  return "[" + out + "]";
}

class Planner {
 public:
  Planner(const nn::Module& model, const MaxMemory& budget, const PlanOptions& options)
      : options_(options), budget_(budget) {
    sizes_ = compute_module_sizes(model, options.dtype, options.special_dtypes);
    tied_ = nn::find_tied_parameters(model);
    for (const auto& [name, slot] : model.named_parameter_slots(false)) queue_.push_back({name});
    for (const auto& child : model.children()) queue_.push_back({child.name, child.module.get()});
    for (const auto& [name, slot] : model.named_buffer_slots(false)) queue_.push_back({name});
    init_devices();
  }

  const ModuleSizes& sizes() const { return sizes_; }
  /// Makes each module for which `is_unit` holds a queue item of its own (splitting the items that hold one) and
  /// moves the units behind everything else; each group keeps its order.
  void units_last(const std::function<bool(const PlanItem&)>& is_unit);
  /// Splits each queued module that holds a tied parameter with a partner outside it, down to the module holding
  /// that parameter directly: the tie then brings only that module along with its partner (e.g. a T5 encoder's
  /// embed_tokens with the shared embedding), not the whole of a unit queued last.
  void open_tied_units();
  DeviceMap run();

 private:
  void init_devices();
  void log(const std::string& message) const {
    if (options_.verbose) log_info("{}", message);
  }
  void recompute_max_layer() {
    std::vector<PlanItem> modules;
    for (const auto& item : queue_)
      if (item.module != nullptr) modules.push_back(item);
    max_layer_ = get_max_layer_size(modules, sizes_, options_.no_split_module_classes);
  }
  bool try_place(const PlanItem& item, DeviceState& dev, std::optional<int64_t> limit, const SizeWithTies& ties);
  bool try_split_tied_owner(const PlanItem& item, const SizeWithTies& ties);
  void warn_about_buffers() const;
  void log_empty_devices() const;
  [[noreturn]] void fail_out_of_devices(const PlanItem& item) const;

  const PlanOptions& options_;
  const MaxMemory& budget_;
  ModuleSizes sizes_;
  TiedGroups tied_;
  PlanQueue queue_;
  std::vector<DeviceState> devices_;
  MaxLayer max_layer_;
  DeviceMap map_;
  std::vector<std::pair<Device, int64_t>> minimum_needed_;  // devices left empty, with what the first item needed
};

void Planner::init_devices() {
  for (const auto& e : budget_.entries()) {
    if (e.device.is_disk()) continue;
    devices_.push_back({e.device, e.bytes});
  }
  if (options_.allow_disk) devices_.push_back({Device::disk(), std::nullopt});
  // Main devices: the first GPU (it runs every offloaded layer) and the cpu (it stages every disk layer).
  // A main device keeps its reserve only when something can be offloaded behind it; with disk allowed that is
  // always so, as in Accelerate. Without disk the cpu is the last stop and needs none.
  auto keeps_reserve = [&](std::size_t i) {
    for (std::size_t j = i + 1; j < devices_.size(); ++j)
      if (!devices_[j].device.is_accelerator()) return true;
    return false;
  };
  for (std::size_t i = 0; i < devices_.size(); ++i) {
    bool first_gpu = devices_[i].device.is_accelerator() && i == 0;
    bool cpu = devices_[i].device.is_cpu();
    devices_[i].main = (first_gpu || cpu) && keeps_reserve(i);
  }
}

// Experts behind the dense parts (PlanOptions::expert_module_classes), prompt modules behind both (PlanStrategy::Fast):
// split every queued module that holds a unit down to the units, then move the units last.
void Planner::units_last(const std::function<bool(const PlanItem&)>& is_unit) {
  auto holds_unit = [&](const PlanItem& item) {
    if (item.module == nullptr || is_unit(item)) return false;
    for (const auto& named : item.module->named_modules()) {
      if (named.module == item.module) continue;
      const std::string name = item.name.empty() ? named.name : item.name + "." + named.name;
      if (is_unit({name, named.module})) return true;
    }
    return false;
  };
  PlanQueue expanded;
  while (!queue_.empty()) {
    PlanItem item = std::move(queue_.front());
    queue_.pop_front();
    if (!holds_unit(item)) {
      expanded.push_back(std::move(item));
      continue;
    }
    std::vector<PlanItem> children = split_items(item);
    queue_.insert(queue_.begin(), children.begin(), children.end());
  }
  std::stable_partition(expanded.begin(), expanded.end(), [&](const PlanItem& i) { return !is_unit(i); });
  queue_ = std::move(expanded);
}

void Planner::open_tied_units() {
  auto tied_inside = [&](const PlanItem& item) {  // a tied parameter below `item`, not its own, with a partner outside
    for (const auto& group : tied_)
      for (const std::string& p : group) {
        if (!is_inside(p, item.name) || p.substr(0, p.rfind('.')) == item.name) continue;
        for (const std::string& other : group)
          if (!is_inside(other, item.name)) return true;
      }
    return false;
  };
  for (std::size_t i = 0; i < queue_.size();) {
    const PlanItem item = queue_[i];
    if (item.module == nullptr || !tied_inside(item)) {
      ++i;
      continue;
    }
    std::vector<PlanItem> children = split_items(item);
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    queue_.insert(queue_.begin() + static_cast<std::ptrdiff_t>(i), children.begin(), children.end());
  }
}

bool Planner::try_place(const PlanItem& item, DeviceState& dev, std::optional<int64_t> limit,
                        const SizeWithTies& ties) {
  if (limit && dev.used + ties.size > *limit) return false;
  if (options_.verbose) {
    std::string what = ties.owners.empty() ? fmt::format(" (size={})", sizes_[item.name])
                                           : " and " + join_names(ties.owners);
    std::string available = limit ? fmt::format(" (available={})", *limit - dev.used) : "";
    log(fmt::format("Putting {}{}{} on {}.", item.name, what, available, dev.device.str()));
  }
  dev.used += ties.size;
  map_.set(item.name, dev.device);
  for (const auto& owner : ties.owners) {
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](const PlanItem& i) { return i.name == owner.name; });
    if (it != queue_.end()) queue_.erase(it);
    map_.set(owner.name, dev.device);
  }
  if (!options_.offload_buffers && item.module != nullptr)
    dev.buffers += compute_module_total_buffer_size(*item.module, options_.dtype, options_.special_dtypes);
  return true;
}

bool Planner::try_split_tied_owner(const PlanItem& item, const SizeWithTies& ties) {
  for (const auto& owner : ties.owners) {
    if (!can_split(owner, options_.no_split_module_classes)) continue;
    log(fmt::format("Splitting {}.", owner.name));
    auto children = split_items(owner);
    auto it = std::find_if(queue_.begin(), queue_.end(), [&](const PlanItem& i) { return i.name == owner.name; });
    if (it == queue_.end()) continue;
    it = queue_.erase(it);
    queue_.insert(it, children.begin(), children.end());
    queue_.push_front(item);
    recompute_max_layer();
    return true;
  }
  return false;
}

DeviceMap Planner::run() {
  max_layer_ = get_max_layer_size(std::vector<PlanItem>(queue_.begin(), queue_.end()), sizes_,
                                  options_.no_split_module_classes);
  std::size_t current = 0;
  while (!queue_.empty()) {
    PlanItem item = std::move(queue_.front());
    queue_.pop_front();
    log(fmt::format("Treating module {}.", item.name));
    // The largest layer may be gone now; if every name realising it is placed, find the next largest.
    auto& names = max_layer_.names;
    names.erase(std::remove_if(names.begin(), names.end(),
                               [&](const std::string& n) { return is_inside(n, item.name); }),
                names.end());
    if (names.empty()) recompute_max_layer();

    const int64_t module_size = sizes_[item.name];
    const std::vector<std::string> tied_params = outside_tied_params(item.name, tied_);
    if (!tied_params.empty() && options_.verbose) {
      std::string list;
      for (const auto& p : tied_params) list += (list.empty() ? "'" : ", '") + p + "'";
      log(fmt::format("  So those parameters need to be taken into account [{}]", list));
    }
    if (current >= devices_.size()) fail_out_of_devices(item);
    DeviceState& dev = devices_[current];
    const int64_t reserved = dev.main ? max_layer_.size : 0;
    const std::optional<int64_t> limit = dev.budget ? std::optional<int64_t>(*dev.budget - reserved) : std::nullopt;
    const SizeWithTies ties = size_with_ties(tied_params, module_size, sizes_, queue_);

    if (try_place(item, dev, limit, ties)) continue;

    // The module alone fits: make room by splitting one of its tied owners.
    if (!tied_params.empty() && dev.used + module_size <= *limit) {
      log(fmt::format("Not enough space on {} to put {} and {} (space available {}, needed size {}).",
                      dev.device.str(), item.name, join_names(ties.owners), *limit - dev.used, ties.size));
      if (try_split_tied_owner(item, ties)) continue;
      log("None of the tied module can be split, going to the next device.");
    }

    if (dev.used + module_size >= *limit) {
      log(fmt::format("Not enough space on {} to put {} (space available {}, module size {}).", dev.device.str(),
                      item.name, *limit - dev.used, module_size));
      if (can_split(item, options_.no_split_module_classes)) {
        log(fmt::format("Splitting {}.", item.name));
        auto children = split_items(item);
        queue_.insert(queue_.begin(), children.begin(), children.end());
        recompute_max_layer();
        continue;
      }
      log("This module cannot be split, going to the next device.");
    }

    if (dev.used == 0 && options_.fallback_allocation && !dev.device.is_disk()) {
      int64_t fallback_limit = *dev.budget - std::max(max_layer_.size, ties.size);
      if (auto found = fallback_allocate(queue_, sizes_, fallback_limit - dev.used, options_.no_split_module_classes,
                                         tied_)) {
        queue_.push_front(item);
        queue_.push_front(*found);
        continue;
      }
    }

    if (dev.used == 0) minimum_needed_.emplace_back(dev.device, ties.size + reserved);
    dev.used += reserved;
    dev.kept = reserved;
    ++current;
    queue_.push_front(std::move(item));
  }

  DeviceMap out = options_.clean_result ? clean_device_map(map_) : map_;
  warn_about_buffers();
  log_empty_devices();
  return out;
}

void Planner::warn_about_buffers() const {
  if (options_.offload_buffers) return;
  int64_t offloaded_buffers = 0;
  bool any_gpu = false;
  for (const auto& d : devices_) {
    if (!d.device.is_accelerator()) offloaded_buffers += d.buffers;
    any_gpu |= d.device.is_accelerator();
  }
  if (offloaded_buffers == 0 || !any_gpu) return;
  // Buffers of offloaded modules stay on the execution device, all at once; some GPU must hold them.
  for (const auto& e : budget_.entries()) {
    if (!e.device.is_accelerator()) continue;
    auto d = std::find_if(devices_.begin(), devices_.end(), [&](const DeviceState& s) { return s.device == e.device; });
    int64_t used = d == devices_.end() ? 0 : d->used;
    if (e.bytes >= offloaded_buffers + used) return;
  }
  log_warning(
      "Current model requires {} bytes of buffer for offloaded layers, which seems does not fit any GPU's remaining "
      "memory. If you are experiencing a OOM later, please consider using offload_buffers=True.",
      offloaded_buffers);
}

void Planner::log_empty_devices() const {
  if (minimum_needed_.empty()) return;
  std::string lines;
  for (const auto& [device, bytes] : minimum_needed_) lines += fmt::format("\n  - {}: {} bytes required", device.str(), bytes);
  log_warning(
      "Based on the current allocation process, no modules could be assigned to the following devices due to "
      "insufficient memory:{}\nThese minimum requirements are specific to this allocation attempt and may vary. "
      "Consider increasing the available memory for these devices to at least the specified minimum, or adjusting "
      "the model config.",
      lines);
}

void Planner::fail_out_of_devices(const PlanItem& item) const {
  int64_t left = sizes_[item.name];
  for (const auto& i : queue_) left += sizes_[i.name];
  std::string usage;
  for (const auto& d : devices_) {
    usage += fmt::format("{}{}: {} placed", usage.empty() ? "" : "; ", d.device.str(), format_bytes(d.used - d.kept));
    if (d.kept > 0) usage += fmt::format(" + {} kept free for the largest offloaded layer", format_bytes(d.kept));
    usage += fmt::format(" of {}", format_bytes(d.budget.value_or(0)));
  }
  throw Error(ErrorKind::OutOfMemory,
              fmt::format("the model does not fit without disk offload: '{}' and what follows ({}) found no room "
                          "({})",
                          item.name, format_bytes(left), usage),
              "infer_auto_device_map",
              "allow disk offload, raise max_memory, lower the reservations (a shorter context), or load in a "
              "smaller dtype");
}

}  // namespace

namespace {

// The plan in the order `options` asks for: Accelerate's queue, with experts and (PlanStrategy::Fast) prompt modules
// and then tables read by the row moved behind the rest.
DeviceMap plan_in_order(const nn::Module& model, const MaxMemory& budget, const PlanOptions& options, bool fast,
                        const std::vector<std::string>& tables_last = {}) {
  PlanOptions o = options;
  for (const std::string& c : options.expert_module_classes)  // an expert is placed whole
    if (std::find(o.no_split_module_classes.begin(), o.no_split_module_classes.end(), c) ==
        o.no_split_module_classes.end())
      o.no_split_module_classes.push_back(c);
  Planner planner(model, budget, o);
  if (!options.expert_module_classes.empty())
    planner.units_last([&](const PlanItem& i) {
      return i.module != nullptr &&
             std::find(options.expert_module_classes.begin(), options.expert_module_classes.end(),
                       i.module->type_name()) != options.expert_module_classes.end();
    });
  if (fast) {
    auto is_prompt = [&](const PlanItem& i) {
      return i.module != nullptr && std::find(options.prompt_modules.begin(), options.prompt_modules.end(), i.name) !=
                                        options.prompt_modules.end();
    };
    planner.units_last(is_prompt);
    // Tables read by the row (embeddings) cost a row per token wherever they are: behind everything.
    if (!tables_last.empty())
      planner.units_last([&](const PlanItem& i) {
        if (i.module == nullptr || i.module->row_lookup_parameter().empty()) return false;
        const std::string param = (i.name.empty() ? "" : i.name + ".") + std::string(i.module->row_lookup_parameter());
        return std::binary_search(tables_last.begin(), tables_last.end(), param);
      });
    planner.open_tied_units();
  }
  if (!o.allow_disk) check_budget_can_fit(planner.sizes(), budget, o);
  return planner.run();
}

// What a generated token reads under `map` off the device that computes (the first GPU of the budget, else the cpu):
// {from disk, in all}. Experts count whole (both plans place them alike).
std::pair<double, double> token_reads_of(const nn::Module& model, const DeviceMap& map, const MaxMemory& budget,
                                         const PlanOptions& options) {
  Device compute = Device::cpu();
  for (const auto& e : budget.entries())
    if (e.device.is_accelerator() && e.bytes > 0) {
      compute = e.device;
      break;
    }
  const ReadProfile profile{options.expert_module_classes, 1.0, options.prompt_modules};
  double disk = 0;
  const std::vector<TokenReads> reads = per_token_reads(model, map, compute, profile, options.dtype);
  for (const TokenReads& r : reads)
    if (r.device.is_disk()) disk = r.expected_bytes;
  return {disk, token_read_bytes(reads)};
}

}  // namespace

DeviceMap infer_with_budget(const nn::Module& model, const MaxMemory& budget, const PlanOptions& options) {
  if (options.strategy != PlanStrategy::Fast) return plan_in_order(model, budget, options, false);
  const std::vector<std::string> tables = row_lookup_tables(model);
  if (options.prompt_modules.empty() && tables.empty()) return plan_in_order(model, budget, options, false);
  // PlanStrategy::Fast promises never to read more per generated token than Accelerate's order. Placing prompt
  // modules last can lose where Accelerate's order fits everything: the main device keeps room for the largest
  // module still queued, and a prompt module queued last keeps that room taken until the end; a table queued last
  // can likewise leave its room unused. So the candidates — prompt modules last, and tables behind them too — are
  // each kept only when they read less per token (from disk, then in all) than the best so far, starting from
  // Accelerate's plan.
  DeviceMap best = plan_in_order(model, budget, options, false);
  auto best_reads = token_reads_of(model, best, budget, options);
  bool accelerate = true;
  for (const bool tables_last : {false, true}) {
    if (tables_last ? tables.empty() : options.prompt_modules.empty()) continue;
    DeviceMap candidate = plan_in_order(model, budget, options, true,
                                        tables_last ? tables : std::vector<std::string>{});
    const auto reads = token_reads_of(model, candidate, budget, options);
    if (reads.first > best_reads.first || reads.second > best_reads.second) continue;
    if (reads == best_reads && tables_last) continue;  // no gain: keep the plan closer to Accelerate's order
    best = std::move(candidate);
    best_reads = reads;
    accelerate = false;
  }
  if (accelerate && options.verbose)
    log_info("fast plan: Accelerate's order reads less per token for this budget; using it");
  return best;
}

}  // namespace ferry::detail

namespace ferry {

DeviceMap infer_auto_device_map(const nn::Module& model, const PlanOptions& options) {
  MaxMemory budget = detail::budget_after_reservations(get_max_memory(options.max_memory), options.reservations);
  return detail::infer_with_budget(model, budget, options);
}

}  // namespace ferry
