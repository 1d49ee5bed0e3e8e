// A pipeline over ranks: which rank loads what, and the hooks that run each module on its own rank
// (big_modeling/pipeline.h).
#include "ferry/big_modeling/pipeline.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <unordered_map>

#include "ferry/big_modeling/module_sizes.h"
#include "ferry/core/error.h"
#include "ferry/nn/embedding.h"
#include "ferry/nn/hooks.h"
#include "ferry/nn/linear.h"

namespace ferry {
namespace {

// Activations of micro-batch `slot` travel under kActivationTag + slot (the sequence commands use 7002).
constexpr int kActivationTag = 7100;
std::atomic<std::size_t> g_bytes_sent{0}, g_bytes_received{0};
std::atomic<int64_t> g_wait_ns{0};

thread_local int t_slot = 0;
thread_local PipelineTurns* t_turns = nullptr;

int activation_tag() { return kActivationTag + t_slot; }

// Runs `wait` (a blocking exchange with another rank) outside this thread's turn, if it holds one, and counts the
// time it blocked.
template <class Wait>
auto outside_turn(Wait&& wait) {
  const auto t0 = std::chrono::steady_clock::now();
  struct Requeue {
    PipelineTurns* turns;
    std::chrono::steady_clock::time_point t0;
    ~Requeue() {
      g_wait_ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
      if (turns != nullptr) turns->wait(turns->take());
    }
  } requeue{t_turns, t0};
  if (t_turns != nullptr) t_turns->release();
  return wait();
}

Tensor received(Tensor t) {
  g_bytes_received += t.nbytes();
  return t;
}

bool holds_parameters(const nn::Module& model, const std::string& key) {
  const nn::Module& m = model.get_submodule(key);
  return !m.named_parameters().empty();
}

// Zeros shaped like `module`'s output for input `x`: what a module run on another rank stands for here.
Tensor stand_in(const nn::Module& module, const Tensor& x) {
  Shape shape = x.shape();
  if (const auto* e = dynamic_cast<const nn::Embedding*>(&module)) {
    shape.push_back(e->embedding_dim());
  } else if (const auto* l = dynamic_cast<const nn::Linear*>(&module)) {
    shape.back() = l->out_features();
  } else if (const auto* c = dynamic_cast<const nn::Conv1D*>(&module)) {
    shape.back() = c->nf();
  } else if (!is_floating_point(x.dtype())) {
    throw Error("a pipeline cannot stand in for " + module.type_name() + " here: its input is " +
                    std::string(dtype_name(x.dtype())) + ", so the shape of its output is unknown",
                "pipeline", "keep this module on rank 0 with the embeddings");
  }
  return Tensor::zeros(std::move(shape), DType::F32);
}

const Tensor& first_tensor(const nn::Args& args, const std::string& where) {
  if (args.size() == 0 || !args[0].is_tensor())
    throw Error("a pipeline boundary needs the module's input as its first argument", where, "");
  return args[0].tensor();
}

// A stage of the pipeline: a block the model runs in turn (`first`: it takes the embeddings' output from rank 0, `to`:
// the rank of what runs next), or — with first false and to -1 — a module of rank 0 outside the blocks.
class StageHook final : public nn::ModelHook {
 public:
  StageHook(std::string name, std::shared_ptr<ProcessGroup> group, int rank, bool first, int to)
      : name_(std::move(name)), group_(std::move(group)), rank_(rank), first_(first), to_(to) {}

  std::optional<nn::Value> replace_forward(nn::Module& module, const nn::Args& args) override {
    const int me = group_->rank();
    if (rank_ == me) return std::nullopt;
    if (first_ && me == 0) send(first_tensor(args, name_), rank_);  // the blocks' input, from the embeddings
    if (to_ == me) return nn::Value(receive(rank_));                // what runs next runs here
    return nn::Value(stand_in(module, first_tensor(args, name_)));
  }

  nn::Args pre_forward(nn::Module& module, nn::Args args) override {
    (void)module;
    if (first_ && rank_ != 0) {
      if (args.size() == 0) throw Error("a pipeline stage needs its input as its first argument", name_);
      args[0] = nn::Value(receive(0));
    }
    return args;
  }

  nn::Value post_forward(nn::Module& module, nn::Value output) override {
    (void)module;
    if (to_ >= 0 && to_ != rank_) {
      if (!output.is_tensor())
        throw Error("a pipeline stage's output is not a single tensor", name_, "split the model at its blocks");
      send(output.tensor(), to_);
    }
    return output;
  }

  std::string describe() const override {
    return "PipelineStageHook(" + name_ + " on rank " + std::to_string(rank_) + ")";
  }

 private:
  // Without waiting for `to` to take it (a copy of its own travels): this rank goes on with its next micro-batch, and
  // posts the receive of this one's result at once.
  void send(const Tensor& t, int to) {
    const Tensor host = t.device().is_host_addressable() ? t.clone() : t.to(Device::cpu());
    group_->send_tensor_async(host, to, activation_tag());
    g_bytes_sent += host.nbytes();
  }

  Tensor receive(int from) {
    return received(outside_turn([&] { return group_->recv_tensor(from, activation_tag()); }));
  }

  std::string name_;
  std::shared_ptr<ProcessGroup> group_;
  int rank_;
  bool first_;
  int to_;
};

}  // namespace

bool has_ranks(const DeviceMap& map) {
  return std::any_of(map.begin(), map.end(), [](const auto& e) { return e.second.rank != 0; });
}

int ranks_named(const DeviceMap& map) {
  int most = 0;
  for (const auto& [name, device] : map) most = std::max(most, device.rank);
  return most + 1;
}

RankShare rank_share(const nn::Module& model, const DeviceMap& map, int rank, int group_size) {
  if (ranks_named(map) > group_size)
    throw Error("the device map names rank " + std::to_string(ranks_named(map) - 1) + " but the job has " +
                    std::to_string(group_size) + " rank" + (group_size == 1 ? "" : "s"),
                "device map", "start one process per rank: mpirun -np " + std::to_string(ranks_named(map)) + " ...");
  RankShare share;
  for (const auto& [name, device] : map) {
    if (device.rank == rank || !holds_parameters(model, name)) {
      share.local.set(name, device.rank == rank ? device.local() : Device::cpu());
    } else {
      share.local.set(name, Device::disk());
      share.remote.push_back(name);
    }
  }
  return share;
}

void check_pipeline_map(const nn::Module& model, const DeviceMap& map, std::span<const std::string> blocks) {
  for (const auto& [name, device] : map) {
    if (device.rank == 0 || std::find(blocks.begin(), blocks.end(), name) != blocks.end()) continue;
    if (holds_parameters(model, name))
      throw Error(name + " is on rank " + std::to_string(device.rank) + ", but only the decoder blocks of a pipeline " +
                      "may be on other ranks",
                  "device map", "keep the embeddings, the final norm and the head on rank 0 (plain devices)");
  }
}

void attach_pipeline_hooks(nn::Module& model, const DeviceMap& map, std::span<const std::string> blocks,
                           std::shared_ptr<ProcessGroup> group) {
  std::unordered_map<std::string, int> block_rank;
  for (const auto& b : blocks) {
    const auto d = map.at(b);
    if (!d) throw Error("the device map has no entry for block " + b, "pipeline", "give each block its own entry");
    block_rank.emplace(b, d->rank);
  }
  check_pipeline_map(model, map, blocks);
  for (const auto& [name, device] : map) {
    if (block_rank.count(name) || !holds_parameters(model, name)) continue;
    nn::add_hook_to_module(model.get_submodule(name), std::make_shared<StageHook>(name, group, 0, false, -1), true);
  }
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    const int to = i + 1 < blocks.size() ? block_rank.at(blocks[i + 1]) : 0;
    nn::add_hook_to_module(model.get_submodule(blocks[i]),
                           std::make_shared<StageHook>(blocks[i], group, block_rank.at(blocks[i]), i == 0, to), true);
  }
}

DeviceMap infer_device_map_over_ranks(const nn::Module& model, const std::string& layers_prefix,
                                      const MaxMemory& budgets, bool balanced, std::optional<DType> dtype) {
  const ModuleSizes sizes = compute_module_sizes(model, dtype);
  // The map's entries: the modules on the way to the blocks are split into their children.
  std::vector<std::string> outside, blocks, order;
  std::function<void(const std::string&, const nn::Module&)> walk = [&](const std::string& name, const nn::Module& m) {
    for (const auto& [sub, child] : m.named_children()) {
      const std::string full = name.empty() ? sub : name + "." + sub;
      if (full == layers_prefix) {
        for (const auto& [i, block] : child->named_children()) {
          blocks.push_back(full + "." + i);
          order.push_back(blocks.back());
        }
      } else if (layers_prefix.rfind(full + ".", 0) == 0) {
        walk(full, *child);
      } else {
        outside.push_back(full);
        order.push_back(full);
      }
    }
  };
  walk("", model);
  if (blocks.empty()) throw Error("the model has no blocks under " + layers_prefix, "device map over ranks", "");
  // Devices by rank, each rank's in Accelerate's order; one disk, last.
  std::vector<MaxMemory::Entry> devices;
  std::optional<Device> disk;
  for (const auto& e : budgets.entries()) {
    if (e.device.is_disk()) {
      if (disk && disk->rank != e.device.rank)
        throw Error("two ranks list a disk: " + disk->str() + " and " + e.device.str(), "--max-memory",
                    "list one disk, for the rank that reads the blocks that do not fit in memory");
      disk = e.device;
    } else {
      devices.push_back(e);
    }
  }
  auto kind_order = [](const Device& d) { return d.is_accelerator() ? 0 : 1; };
  std::stable_sort(devices.begin(), devices.end(), [&](const MaxMemory::Entry& a, const MaxMemory::Entry& b) {
    if (a.device.rank != b.device.rank) return a.device.rank < b.device.rank;
    if (kind_order(a.device) != kind_order(b.device)) return kind_order(a.device) < kind_order(b.device);
    return a.device.index < b.device.index;
  });
  if (devices.empty() || devices.front().device.rank != 0)
    throw Error("no budget for rank 0", "--max-memory",
                "rank 0 holds the embeddings and the head: give it memory (rank0:cpu=8GiB, or plain cpu=8GiB)");
  DeviceMap map;
  std::vector<int64_t> left;
  for (const auto& d : devices) left.push_back(d.bytes);
  int64_t outside_bytes = 0;
  for (const auto& n : outside) outside_bytes += sizes[n];
  if (outside_bytes > left[0])
    throw Error("rank 0's first device (" + devices[0].device.str() + ", " + std::to_string(left[0]) +
                    " bytes) cannot hold the modules outside the blocks (" + std::to_string(outside_bytes) + " bytes)",
                "--max-memory", "give rank 0 more memory");
  left[0] -= outside_bytes;
  // Balanced: a rank takes blocks while its share of the blocks' bytes, in proportion to its memory, lasts.
  std::vector<int64_t> share;  // per device index: the most block bytes it takes (balanced), else its budget
  if (balanced) {
    int64_t total_blocks = 0, total_memory = 0;
    for (const auto& b : blocks) total_blocks += sizes[b];
    for (std::size_t i = 0; i < devices.size(); ++i) total_memory += left[i];
    for (std::size_t i = 0; i < devices.size(); ++i)
      share.push_back(std::min(left[i], total_memory > 0 ? static_cast<int64_t>(static_cast<double>(total_blocks) *
                                                                                static_cast<double>(left[i]) /
                                                                                static_cast<double>(total_memory)) +
                                                               1
                                                         : 0));
  } else {
    share = left;
  }
  std::size_t d = 0;
  for (const auto& b : blocks) {
    const int64_t need = sizes[b];
    // A balanced device past its share still takes a block when it is the last device with room.
    while (d < devices.size() && need > share[d] && !(balanced && need <= left[d] && d + 1 == devices.size())) ++d;
    if (d < devices.size()) {
      map.set(b, devices[d].device);
      share[d] -= need;
      left[d] -= need;
    } else if (disk) {
      map.set(b, *disk);
    } else {
      throw Error("the blocks do not fit in the ranks' budgets (" + budgets.describe() + ")", "--max-memory",
                  "give the ranks more memory, or list a disk (rank1:disk)");
    }
  }
  DeviceMap out;  // in the model's order
  for (const auto& n : order) out.set(n, map.contains(n) ? *map.at(n) : devices[0].device);
  return out;
}

PipelineTraffic pipeline_traffic() noexcept {
  return {g_bytes_sent.load(), g_bytes_received.load(), static_cast<double>(g_wait_ns.load()) * 1e-9};
}

int64_t PipelineTurns::take() {
  std::lock_guard lock(mutex_);
  return next_++;
}

void PipelineTurns::wait(int64_t ticket) {
  std::unique_lock lock(mutex_);
  served_.wait(lock, [&] { return serving_ == ticket; });
  since_ = std::chrono::steady_clock::now();
}

void PipelineTurns::release() {
  {
    std::lock_guard lock(mutex_);
    busy_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - since_).count();
    ++serving_;
  }
  served_.notify_all();
}

double PipelineTurns::busy_seconds() const {
  std::lock_guard lock(mutex_);
  return busy_;
}

MicroBatchScope::MicroBatchScope(int slot, PipelineTurns* turns) : previous_slot_(t_slot), previous_turns_(t_turns) {
  if (slot < 0 || slot >= kMaxMicroBatches)
    throw Error("micro-batch " + std::to_string(slot) + " is outside 0.." + std::to_string(kMaxMicroBatches - 1),
                "pipeline", "every rank must run the same ferry version");
  t_slot = slot;
  t_turns = turns;
}

MicroBatchScope::~MicroBatchScope() {
  t_slot = previous_slot_;
  t_turns = previous_turns_;
}

}  // namespace ferry
