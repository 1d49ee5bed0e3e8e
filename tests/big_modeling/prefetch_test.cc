// Prefetcher: which weights are read ahead, in which order, and that prefetching never changes an output.
#include "ferry/big_modeling/prefetch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <future>

#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "dispatch_support.h"
#include "ferry/big_modeling/attach.h"
#include "ferry/big_modeling/cpu_offload.h"
#include "ferry/big_modeling/dispatch.h"
#include "ferry/io/offload.h"
#include "ferry/nn/hooks.h"
#include "ferry/nn/module_tensors.h"
#include "support/error_of.h"
#include "support/model_for_test.h"

namespace ferry {
namespace {

using test::same_values;

// Serves another map and records every prefetch() it is given, full names in call order.
class RecordingMap : public io::WeightsMap {
 public:
  explicit RecordingMap(std::shared_ptr<const io::WeightsMap> inner) : inner_(std::move(inner)) {}
  Tensor get(const std::string& key) const override {
    if (before_get) before_get();
    return inner_->get(key);
  }
  bool contains(const std::string& key) const override { return inner_->contains(key); }
  std::vector<std::string> keys() const override { return inner_->keys(); }
  std::size_t size() const override { return inner_->size(); }
  bool prefetch(const std::string& key) const noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.push_back(key);
    return !resident.count(key);  // "had to read"
  }
  std::set<std::string> resident;  // keys whose bytes are already in memory; set before the prefetcher runs
  /// Runs before each get(): a test's stand-in for a disk whose reads wait for the prefetches under way.
  std::function<void()> before_get;
  std::vector<std::string> take() const {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(calls_, {});
  }

 private:
  std::shared_ptr<const io::WeightsMap> inner_;
  mutable std::mutex mu_;
  mutable std::vector<std::string> calls_;
};

using Names = std::vector<std::string>;

struct ThreeModules : ::testing::Test {
  int a = 0, b = 0, c = 0;  // their addresses are the module ids
  std::shared_ptr<RecordingMap> map = std::make_shared<RecordingMap>(std::make_shared<io::OffloadedWeightsLoader>());

  void add_all(Prefetcher& p) {
    p.add(&a, map, {"a.w"});
    p.add(&b, map, {"b.w", "b.bias"});
    p.add(&c, map, {"c.w"});
  }
  Names run(Prefetcher& p, const void* id) {
    p.will_run(id);
    p.wait_idle();
    return map->take();
  }
};

TEST_F(ThreeModules, ReadsTheNextModulesOncePerForwardAndWrapsToTheFirst) {
  Prefetcher p(2);
  add_all(p);
  EXPECT_EQ(run(p, &a), (Names{"b.w", "b.bias", "c.w"}));
  EXPECT_EQ(run(p, &b), (Names{"a.w"}));  // c is already read; after c comes the next forward's a
  EXPECT_EQ(run(p, &c), (Names{"b.w", "b.bias"}));
  // Steady state, every later forward: each module read once, two modules before it runs.
  for (int forward = 0; forward < 3; ++forward) {
    EXPECT_EQ(run(p, &a), (Names{"c.w"}));
    EXPECT_EQ(run(p, &b), (Names{"a.w"}));
    EXPECT_EQ(run(p, &c), (Names{"b.w", "b.bias"}));
  }
  EXPECT_EQ(p.prefetched(), 6u + 3u * 4u);
}

TEST_F(ThreeModules, DepthOneReadsOnlyTheNextModule) {
  Prefetcher p(1);
  add_all(p);
  EXPECT_EQ(run(p, &a), (Names{"b.w", "b.bias"}));
  EXPECT_EQ(run(p, &b), (Names{"c.w"}));
  EXPECT_EQ(run(p, &c), (Names{"a.w"}));
}

TEST_F(ThreeModules, TheFirstForwardConfirmsTheOrder) {
  Prefetcher p(1);
  add_all(p);  // attach order a, b, c: the guess until a forward shows otherwise
  EXPECT_EQ(p.order(), (std::vector<const void*>{&a, &b, &c}));
  EXPECT_EQ(run(p, &c), (Names{"a.w"}));  // by the guess, a follows c
  EXPECT_EQ(run(p, &a), (Names{"b.w", "b.bias"}));
  EXPECT_EQ(run(p, &b), (Names{"c.w"}));
  EXPECT_FALSE(p.order_confirmed());
  run(p, &c);  // c again: the first forward was c, a, b
  EXPECT_TRUE(p.order_confirmed());
  EXPECT_EQ(p.order(), (std::vector<const void*>{&c, &a, &b}));
  EXPECT_EQ(run(p, &a), (Names{"b.w", "b.bias"}));
  EXPECT_EQ(run(p, &b), (Names{"c.w"}));
}

// An encoder-decoder model: a (the encoder) runs once, then b, c (the decoder) per token. After c the next module
// is b, not a: the read-ahead follows the successor each module last had.
TEST_F(ThreeModules, ALoopOverPartOfTheModulesIsFollowed) {
  Prefetcher p(1);
  add_all(p);
  run(p, &a);
  run(p, &b);
  run(p, &c);
  run(p, &b);  // b again: the order a, b, c is confirmed; c -> b is a jump
  EXPECT_TRUE(p.order_confirmed());
  EXPECT_EQ(run(p, &c), (Names{"b.w", "b.bias"}));  // after c comes b, as last time
  EXPECT_EQ(run(p, &b), (Names{"c.w"}));
  EXPECT_EQ(run(p, &c), (Names{"b.w", "b.bias"}));
  // A new sequence: the encoder again (b, read ahead after c, is still waiting). c -> a replaces c -> b.
  EXPECT_EQ(run(p, &a), (Names{}));
  run(p, &b);
  EXPECT_EQ(run(p, &c), (Names{"a.w"}));
}

TEST_F(ThreeModules, ResidentModulesAreCheckedOneTimeInEight) {
  map->resident = {"a.w", "c.w"};  // a and c are in memory; b must be read every time
  Prefetcher p(1);
  add_all(p);
  auto forward = [&] { return run(p, &a).size() + run(p, &b).size() + run(p, &c).size(); };
  // Two forwards to learn that a and c read nothing; then only b, except that every 8th lookup of a and c
  // prefetches them again (depth 1: one lookup per forward), in case they were evicted.
  EXPECT_EQ(forward(), 4u);
  EXPECT_EQ(forward(), 4u);
  for (int f = 3; f <= 9; ++f) EXPECT_EQ(forward(), 2u) << "forward " << f;
  EXPECT_EQ(forward(), 4u);  // the 8th lookup since they were found resident
  EXPECT_EQ(forward(), 2u);
  // An eviction: the next check reads, and the module is prefetched on every forward again.
  map->resident = {"a.w"};
  for (int f = 12; f <= 17; ++f) EXPECT_EQ(forward(), 2u) << "forward " << f;
  EXPECT_EQ(forward(), 4u);  // c checked: it had to be read
  EXPECT_EQ(forward(), 3u);  // b and c every forward; a still skipped
}

TEST_F(ThreeModules, UnknownAndRemovedModulesAreIgnored) {
  Prefetcher p(2);
  add_all(p);
  int stranger = 0;
  EXPECT_TRUE(run(p, &stranger).empty());
  p.remove(&b);
  p.remove(&stranger);
  EXPECT_EQ(p.order(), (std::vector<const void*>{&a, &c}));
  EXPECT_EQ(run(p, &a), (Names{"c.w"}));  // the ring is a, c: two ahead of a is a itself, not read twice
}

// A mixture-of-experts layer: a, b, c run on every forward; the experts x and y only when the router picks them. The
// model announces a pick: its weights are read at once, before the look-ahead's; the experts stay out of the order
// (not read ahead by position, not learnt as successors), whichever forwards they run in.
TEST_F(ThreeModules, AnnouncedModulesAreReadAtOnceAndStayOutOfTheOrder) {
  int x = 0, y = 0;
  Prefetcher p(1);
  p.add(&a, map, {"a.w"});
  p.add(&x, map, {"x.w"});  // attached between a and b: the attach-order guess puts them there
  p.add(&y, map, {"y.w"});
  p.add(&b, map, {"b.w"});
  p.add(&c, map, {"c.w"});
  EXPECT_EQ(run(p, &a), (Names{"x.w"}));  // before any announcement, x is just the next module by position
  p.announce(&y);
  p.wait_idle();
  EXPECT_EQ(map->take(), (Names{"y.w"}));
  EXPECT_EQ(run(p, &y), (Names{}));  // an announced module running reads nothing ahead and learns nothing
  EXPECT_EQ(run(p, &b), (Names{"c.w"}));
  EXPECT_EQ(run(p, &c), (Names{"a.w"}));
  run(p, &a);  // a again: the order a, b, c is confirmed without y
  EXPECT_TRUE(p.order_confirmed());
  p.announce(&x);  // x is data-dependent from now on: read when announced (again: its read by position was stale)
  p.announce(&x);  // queued already: once
  p.wait_idle();
  EXPECT_EQ(map->take(), (Names{"x.w"}));
  EXPECT_EQ(run(p, &x), (Names{}));
  for (int forward = 0; forward < 4; ++forward) {
    const void* expert = forward % 2 ? static_cast<const void*>(&x) : &y;
    p.announce(expert);
    p.wait_idle();
    EXPECT_EQ(map->take(), (Names{forward % 2 ? "x.w" : "y.w"})) << forward;
    EXPECT_EQ(run(p, expert), (Names{})) << forward;
    EXPECT_EQ(run(p, &b), (Names{"c.w"})) << forward;
    EXPECT_EQ(run(p, &c), (Names{"a.w"})) << forward;
    EXPECT_EQ(run(p, &a), (Names{"b.w"})) << forward;  // the experts are skipped: b is a's next
  }
}

// A prefetch thread that falls behind the forward (a slow read, a loaded machine) does not read a module that has
// already started: its queued job is dropped when the module runs, so the bytes are not read twice.
TEST_F(ThreeModules, AModuleThatRunsBeforeItsQueuedReadIsNotReadAfterwards) {
  struct GatedMap : RecordingMap {
    using RecordingMap::RecordingMap;
    bool prefetch(const std::string& key) const noexcept override {
      if (key == "b.w" && !held.exchange(true)) {  // the first read of b: says so, then waits to be let through
        entered.set_value();
        opened.wait();
      }
      return RecordingMap::prefetch(key);
    }
    std::shared_future<void> opened;
    mutable std::promise<void> entered;
    mutable std::atomic<bool> held{false};
  };
  std::promise<void> open;
  auto gated = std::make_shared<GatedMap>(std::make_shared<io::OffloadedWeightsLoader>());
  gated->opened = open.get_future().share();
  int x = 0;
  Prefetcher p(2);
  p.add(&a, gated, {"a.w"});
  p.add(&b, gated, {"b.w"});
  p.add(&c, gated, {"c.w"});
  p.add(&x, gated, {"x.w"});
  p.will_run(&a);                      // queues b (its read blocks until opened) and c
  gated->entered.get_future().wait();  // the thread is in b's read
  p.announce(&x);                      // an expert, queued before c
  p.will_run(&x);                      // x and c run while b's read is still held up
  p.will_run(&b);
  p.will_run(&c);
  open.set_value();
  p.wait_idle();
  const Names calls = gated->take();
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "x.w"), 0) << "x ran before its read was started";
  EXPECT_EQ(std::count(calls.begin(), calls.end(), "c.w"), 0) << "c ran before its read was started";
  EXPECT_EQ(calls.front(), "b.w");
}

TEST(Prefetcher, DepthMustBePositive) {
  EXPECT_NE(test::error_of([] { Prefetcher p(0); }).find("prefetch depth must be at least 1"), std::string::npos);
  EXPECT_EQ(Prefetcher::create(0, "here"), nullptr);  // an option's 0: synchronous loading
  EXPECT_EQ(Prefetcher::create(3, "here")->depth(), 3);
  const std::string e = test::error_of([] { Prefetcher::create(-2, "the option"); });
  EXPECT_NE(e.find("prefetch must be 0 (off), a number of modules or kPrefetchAuto, got -2"), std::string::npos) << e;
  EXPECT_NE(e.find("the option"), std::string::npos) << e;
  const auto automatic = Prefetcher::create(kPrefetchAuto, "here");
  ASSERT_NE(automatic, nullptr);
  EXPECT_EQ(automatic->depth(), 2);  // until measured otherwise
  EXPECT_TRUE(automatic->status().self_tuning);
  EXPECT_FALSE(Prefetcher::create(3, "here")->status().self_tuning);
}

TEST(Prefetcher, SettingsParseAsTheCliAndPythonTakeThem) {
  EXPECT_EQ(parse_prefetch("auto", "--prefetch"), kPrefetchAuto);
  EXPECT_EQ(parse_prefetch("0", "--prefetch"), 0);
  EXPECT_EQ(parse_prefetch("4", "--prefetch"), 4);
  for (const char* bad : {"", "-1", "two", "2x", "auto2", " 2"}) {
    const std::string e = test::error_of([&] { parse_prefetch(bad, "--prefetch"); });
    EXPECT_NE(e.find("prefetch must be 'auto' or a number"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("--prefetch"), std::string::npos) << e;
  }
  EXPECT_EQ(prefetch_name(kPrefetchAuto), "auto");
  EXPECT_EQ(prefetch_name(3), "3");
  EXPECT_EQ(prefetch_reach(kPrefetchAuto), kPrefetchAutoMaxDepth);
  EXPECT_EQ(prefetch_reach(0), 0);
  EXPECT_EQ(prefetch_reach(4), 4);
}

// kPrefetchAuto: the forwards' durations (first will_run to last has_run) go to the tuner, which switches the depth.
// Here reading ahead makes every forward twice as long: the prefetcher stops reading ahead and says why.
TEST_F(ThreeModules, AutoKeepsTheDepthWhoseForwardsAreShorter) {
  Prefetcher p(kPrefetchAuto);
  add_all(p);
  std::vector<int> depths;
  for (int forward = 0; forward < 10; ++forward) {
    int depth = -1;
    for (const void* id : {static_cast<const void*>(&a), static_cast<const void*>(&b), static_cast<const void*>(&c)}) {
      p.will_run(id);
      if (depth < 0) depth = p.depth();  // the first module's will_run ends the last forward: the depth may change
      std::this_thread::sleep_for(std::chrono::milliseconds(depth == 2 ? 12 : 6));
      p.has_run(id);
    }
    p.wait_idle();
    const Names read = map->take();
    if (depth == 0) {
      EXPECT_TRUE(read.empty()) << "forward " << forward << " read ahead at depth 0";
    }
    depths.push_back(depth);
  }
  // Forwards 1 and 2 at depth 2 (the first confirms the order, the second is the first measured), then the probe.
  EXPECT_EQ(depths[0], 2);
  EXPECT_EQ(p.depth(), 0);
  EXPECT_EQ(depths.back(), 0);
  const PrefetchStatus s = p.status();
  EXPECT_TRUE(s.self_tuning);
  EXPECT_GE(s.probes, 1);
  EXPECT_EQ(s.reason.rfind("depth 0:", 0), 0u) << s.reason;
}

TEST_F(ThreeModules, AutoWithoutHasRunMeasuresNothing) {
  Prefetcher p(kPrefetchAuto);
  add_all(p);
  for (int forward = 0; forward < 10; ++forward) run(p, &a), run(p, &b), run(p, &c);
  EXPECT_EQ(p.depth(), 2);
  EXPECT_EQ(p.status().probes, 0);
  EXPECT_TRUE(p.status().reason.empty());
}

// A model whose weights live in a map, hooked like cpu_offload with a shared prefetcher.
struct HookedModel {
  test::ModelForTest reference;
  test::ModelForTest model;
  std::shared_ptr<RecordingMap> map;
  std::shared_ptr<Prefetcher> prefetcher = std::make_shared<Prefetcher>(1);

  HookedModel() {
    map = std::make_shared<RecordingMap>(std::make_shared<io::OffloadedWeightsLoader>(test::state_dict_of(reference)));
    AttachOptions o;
    o.prefetcher = prefetcher;
    attach_align_device_hook(model, Device::cpu(), /*offload=*/true, map, /*offload_buffers=*/false, "", o);
    // A module's reads wait for what the prefetcher has queued (as a staged reader's take() waits for a read in
    // flight): without it the tiny forward outruns the thread, whose queued reads are then dropped as stale.
    map->before_get = [p = prefetcher.get()] { p->wait_idle(); };
  }
};

TEST(PrefetchHooks, HooksRegisterInAttachOrderAndReadTheNextModuleAhead) {
  HookedModel h;
  const std::vector<const void*> hooks = {find_align_devices_hook(*h.model.linear1).get(),
                                          find_align_devices_hook(*h.model.batchnorm).get(),
                                          find_align_devices_hook(*h.model.linear2).get()};
  EXPECT_EQ(h.prefetcher->order(), hooks);
  Tensor x = test::random_input({2, 3});
  const Tensor expected = h.reference(x);
  for (int forward = 0; forward < 3; ++forward) {
    EXPECT_TRUE(same_values(h.model(x), expected)) << "forward " << forward;
    h.prefetcher->wait_idle();
    // Each module's parameters are read while the one before it runs; after linear2, the next forward's linear1.
    EXPECT_EQ(h.map->take(), (Names{"batchnorm.weight", "batchnorm.bias", "linear2.weight", "linear2.bias",
                                    "linear1.weight", "linear1.bias"}))
        << "forward " << forward;
  }
  EXPECT_TRUE(h.prefetcher->order_confirmed());
  EXPECT_TRUE(h.model.linear1->parameter("weight").is_meta());  // still offloaded between calls
}

// What a model calls for the modules it picks from the data: the hooks pass it to the prefetcher.
TEST(PrefetchHooks, AnnouncingModulesReadsTheirWeightsThroughTheirHooks) {
  HookedModel h;
  nn::Module* picked[] = {h.model.linear2.get(), nullptr};
  nn::announce_will_run(picked);
  h.prefetcher->wait_idle();
  EXPECT_EQ(h.map->take(), (Names{"linear2.weight", "linear2.bias"}));
  Tensor x = test::random_input({2, 3});
  EXPECT_TRUE(same_values(h.model(x), h.reference(x)));  // outputs unchanged
}

TEST(PrefetchHooks, DetachingTheHooksEmptiesThePrefetcher) {
  HookedModel h;
  nn::remove_hook_from_module(h.model, /*recurse=*/true);
  EXPECT_TRUE(h.prefetcher->order().empty());
}

TEST(PrefetchHooks, DispatchAndDiskOffloadShareOnePrefetcherUnlessTurnedOff) {
  test::ModelForTest reference;
  Tensor x = test::random_input({4, 3});
  const Tensor expected = reference(x);
  const DeviceMap map = {{"linear1", Device::disk()}, {"batchnorm", Device::cpu()}, {"linear2", Device::disk()}};
  for (int depth : {0, 1, 2, kPrefetchAuto}) {
    test::ScratchDir dir;
    test::ModelForTest model;
    for (auto& [name, t] : reference.state_dict()) nn::set_module_tensor_to_device(model, name, Device::cpu(), t.clone());
    DispatchOptions o;
    o.offload_dir = dir.path;
    o.prefetch = depth;
    dispatch_model(model, map, o);
    const auto p1 = find_align_devices_hook(*model.linear1)->options().prefetcher;
    const auto p2 = find_align_devices_hook(*model.linear2)->options().prefetcher;
    EXPECT_EQ(p1 != nullptr, depth != 0);
    EXPECT_EQ(p1, p2);
    for (int forward = 0; forward < 2; ++forward) EXPECT_TRUE(same_values(model(x), expected)) << depth;
    if (p1) {
      EXPECT_EQ(p1->depth(), prefetch_reach(depth));
      p1->wait_idle();
      // Per forward: linear2's weight and bias while linear1 runs, then the next forward's linear1's — unless the
      // forward, tiny here, reached a module before the thread started its read (the read is then dropped).
      EXPECT_LE(p1->prefetched(), 2u * 4u);
    }
  }
  for (int depth : {0, 2, kPrefetchAuto}) {
    test::ScratchDir dir;
    test::ModelForTest model;
    for (auto& [name, t] : reference.state_dict()) nn::set_module_tensor_to_device(model, name, Device::cpu(), t.clone());
    disk_offload(model, dir.path, Device::cpu(), false, {}, depth);
    EXPECT_EQ(find_align_devices_hook(*model.linear1)->options().prefetcher != nullptr, depth != 0);
    EXPECT_TRUE(same_values(model(x), expected));
  }
}

TEST(PrefetchHooks, NegativeDepthIsRefused) {
  test::ScratchDir dir;
  test::ModelForTest model;
  DispatchOptions o;
  o.offload_dir = dir.path;
  o.prefetch = -2;  // -1 is kPrefetchAuto
  EXPECT_NE(test::error_of([&] { dispatch_model(model, {{"", Device::disk()}}, o); }).find("prefetch must be 0"),
            std::string::npos);
  EXPECT_NE(test::error_of([&] { disk_offload(model, dir.path, Device::cpu(), false, {}, -2); }).find("prefetch"),
            std::string::npos);
}

}  // namespace
}  // namespace ferry
