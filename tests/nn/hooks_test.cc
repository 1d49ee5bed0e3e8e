// The hook protocol, after Accelerate's tests/test_hooks.py: add / replace / append / remove, hooks that rewrite
// inputs and outputs, detach restoring the plain forward, and exception safety of a hooked call.
#include "ferry/nn/hooks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ferry/core/error.h"
#include "ferry/ops/elementwise.h"
#include "support/model_for_test.h"

namespace ferry::nn {
namespace {

using ::testing::ElementsAre;
using test::ModelForTest;

// Accelerate's PreForwardHook: x + 1 before the forward.
struct PreForwardHook : ModelHook {
  Args pre_forward(Module&, Args args) override {
    args[0] = ops::add(args[0].tensor(), Tensor::full({args[0].tensor().size(-1)}, 1.0, DType::F32));
    return args;
  }
};

// Accelerate's PostForwardHook: output + 1 after the forward.
struct PostForwardHook : ModelHook {
  Value post_forward(Module&, Value out) override {
    return ops::add(out.tensor(), Tensor::full({out.tensor().size(-1)}, 1.0, DType::F32));
  }
};

// Records every callback, so order and counts can be asserted.
struct RecordingHook : ModelHook {
  explicit RecordingHook(std::string tag, std::vector<std::string>* log) : tag(std::move(tag)), log(log) {}
  void init_hook(Module&) override { log->push_back(tag + ".init"); }
  Args pre_forward(Module&, Args a) override {
    log->push_back(tag + ".pre");
    return a;
  }
  Value post_forward(Module&, Value v) override {
    log->push_back(tag + ".post");
    return v;
  }
  void detach_hook(Module&) override { log->push_back(tag + ".detach"); }
  void forward_failed(Module&) noexcept override { log->push_back(tag + ".failed"); }
  std::string tag;
  std::vector<std::string>* log;
};

// A module run elsewhere (a pipeline's other rank): replace_forward's value, and nothing else runs.
struct ElsewhereHook : RecordingHook {
  using RecordingHook::RecordingHook;
  std::optional<Value> replace_forward(Module&, const Args& a) override {
    log->push_back(tag + ".replace");
    return Value(Tensor::zeros(a[0].tensor().shape(), DType::F32));
  }
};

Tensor input() { return Tensor::from_vector<float>({0.5f, -1.0f, 2.0f, 1.5f, 0.0f, -0.5f}, {2, 3}); }

void expect_close(const Tensor& a, const Tensor& b, float tol = 1e-5f) {
  auto x = a.to_vector<float>(), y = b.to_vector<float>();
  ASSERT_EQ(x.size(), y.size());
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], y[i], tol) << i;
}

Tensor plus_one(const Tensor& t) { return ops::add(t, Tensor::full({t.size(-1)}, 1.0, DType::F32)); }

TEST(Hooks, AddAndRemove) {
  ModelForTest model;
  auto hook = std::make_shared<ModelHook>();
  add_hook_to_module(*model.linear1, hook);
  EXPECT_EQ(model.linear1->hook(), hook);
  remove_hook_from_module(*model.linear1);
  EXPECT_EQ(model.linear1->hook(), nullptr);
  EXPECT_THROW(add_hook_to_module(model, nullptr), Error);
}

TEST(Hooks, AddingAgainReplacesWithoutDetach) {
  std::vector<std::string> log;
  ModelForTest model;
  auto a = std::make_shared<RecordingHook>("a", &log);
  auto b = std::make_shared<RecordingHook>("b", &log);
  add_hook_to_module(model, a);
  add_hook_to_module(model, b);
  EXPECT_EQ(model.hook(), b);
  EXPECT_THAT(log, ElementsAre("a.init", "b.init"));  // Accelerate does not detach a replaced hook
  model(input());
  EXPECT_THAT(log, ElementsAre("a.init", "b.init", "b.pre", "b.post"));
}

TEST(Hooks, AppendChainsIntoASequentialHook) {
  std::vector<std::string> log;
  ModelForTest model;
  auto a = std::make_shared<RecordingHook>("a", &log);
  auto b = std::make_shared<RecordingHook>("b", &log);
  add_hook_to_module(model, a);
  add_hook_to_module(model, b, /*append=*/true);
  auto seq = std::dynamic_pointer_cast<SequentialHook>(model.hook());
  ASSERT_NE(seq, nullptr);
  EXPECT_THAT(seq->hooks(), ElementsAre(a, b));
  EXPECT_THAT(log, ElementsAre("a.init", "a.detach", "a.init", "b.init"));
  log.clear();
  model(input());
  // post_forward runs in the same order as pre_forward, as in Accelerate's SequentialHook.
  EXPECT_THAT(log, ElementsAre("a.pre", "b.pre", "a.post", "b.post"));
  log.clear();
  remove_hook_from_module(model);
  EXPECT_THAT(log, ElementsAre("a.detach", "b.detach"));
  EXPECT_EQ(model.hook(), nullptr);
}

TEST(Hooks, AppendOnAModuleWithoutHookJustAdds) {
  ModelForTest model;
  auto h = std::make_shared<ModelHook>();
  add_hook_to_module(model, h, true);
  EXPECT_EQ(model.hook(), h);
}

TEST(Hooks, PreForwardRewritesInputs) {
  ModelForTest model;
  Tensor x = input();
  Tensor expected = model(plus_one(x));
  add_hook_to_module(model, std::make_shared<PreForwardHook>());
  expect_close(model(x), expected);
  // Replacing with the same hook type: still +1 once, not twice.
  add_hook_to_module(model, std::make_shared<PreForwardHook>());
  expect_close(model(x), expected);
  // Appending a second one: +2.
  add_hook_to_module(model, std::make_shared<PreForwardHook>(), true);
  expect_close(model(x), model.forward(Args{plus_one(plus_one(x))}).tensor());
  remove_hook_from_module(model);
  expect_close(model(x), model.forward(Args{x}).tensor());
}

TEST(Hooks, PostForwardRewritesOutputs) {
  ModelForTest model;
  Tensor x = input();
  Tensor plain = model(x);
  add_hook_to_module(model, std::make_shared<PostForwardHook>());
  expect_close(model(x), plus_one(plain));
  add_hook_to_module(model, std::make_shared<PostForwardHook>(), true);
  expect_close(model(x), plus_one(plus_one(plain)));
  remove_hook_from_module(model);
  expect_close(model(x), plain);
}

TEST(Hooks, HooksOnSubmodulesRunWhenTheParentCallsThem) {
  ModelForTest model;
  Tensor x = input();
  Tensor expected = (*model.linear2)((*model.batchnorm)(plus_one((*model.linear1)(x))));
  add_hook_to_module(*model.batchnorm, std::make_shared<PreForwardHook>());
  expect_close(model(x), expected);
}

struct Throwing : Module {
  Value forward(const Args&) override { throw Error("forward failed"); }
};

TEST(Hooks, ExceptionInForwardLeavesHookStateConsistent) {
  std::vector<std::string> log;
  Throwing m;
  auto a = std::make_shared<RecordingHook>("a", &log);
  auto b = std::make_shared<RecordingHook>("b", &log);
  add_hook_to_module(m, a);
  add_hook_to_module(m, b, true);
  log.clear();
  EXPECT_THROW(m(Args{}), Error);
  // Both pre_forwards ran; no post_forward; forward_failed undoes them in reverse order.
  EXPECT_THAT(log, ElementsAre("a.pre", "b.pre", "b.failed", "a.failed"));
  // The hook is still attached and works for the next call and for removal.
  ASSERT_NE(std::dynamic_pointer_cast<SequentialHook>(m.hook()), nullptr);
  log.clear();
  EXPECT_THROW(m(Args{}), Error);
  EXPECT_THAT(log, ElementsAre("a.pre", "b.pre", "b.failed", "a.failed"));
  log.clear();
  remove_hook_from_module(m);
  EXPECT_THAT(log, ElementsAre("a.detach", "b.detach"));
}

// A hook that materialises state in pre_forward and must put it back even when the forward throws (what
// AlignDevicesHook does with offloaded weights).
struct MaterialiseHook : ModelHook {
  int* live;
  explicit MaterialiseHook(int* live) : live(live) {}
  Args pre_forward(Module&, Args a) override {
    *live = 1;
    return a;
  }
  Value post_forward(Module&, Value v) override {
    *live = 0;
    return v;
  }
  void forward_failed(Module&) noexcept override { *live = 0; }
};

TEST(Hooks, ForwardFailedRestoresBetweenCallsState) {
  int live = 0;
  Throwing m;
  add_hook_to_module(m, std::make_shared<MaterialiseHook>(&live));
  EXPECT_THROW(m(Args{}), Error);
  EXPECT_EQ(live, 0);
}

struct ThrowingPre : ModelHook {
  Args pre_forward(Module&, Args) override { throw Error("pre failed"); }
};

TEST(Hooks, ExceptionInPreForwardOfAChainCallsForwardFailed) {
  std::vector<std::string> log;
  ModelForTest model;
  add_hook_to_module(model, std::make_shared<RecordingHook>("a", &log));
  add_hook_to_module(model, std::make_shared<ThrowingPre>(), true);
  log.clear();
  EXPECT_THROW(model(input()), Error);
  EXPECT_THAT(log, ElementsAre("a.pre", "a.failed"));
}

struct ThrowingInit : ModelHook {
  void init_hook(Module&) override { throw Error("init failed"); }
};

TEST(Hooks, FailedInitKeepsThePreviousHook) {
  ModelForTest model;
  auto h = std::make_shared<ModelHook>();
  add_hook_to_module(model, h);
  EXPECT_THROW(add_hook_to_module(model, std::make_shared<ThrowingInit>()), Error);
  EXPECT_EQ(model.hook(), h);
}

// A forward that removes its own hook: the hook stays alive until the call ends and its post_forward runs.
struct SelfRemoving : Module {
  Value forward(const Args& a) override {
    remove_hook_from_module(*this);
    return a[0];
  }
};

TEST(Hooks, HookRemovedDuringForwardStillFinishesTheCall) {
  std::vector<std::string> log;
  SelfRemoving m;
  add_hook_to_module(m, std::make_shared<RecordingHook>("a", &log));
  m(Args{1});
  EXPECT_THAT(log, ElementsAre("a.init", "a.pre", "a.detach", "a.post"));
  EXPECT_EQ(m.hook(), nullptr);
}

TEST(Hooks, RemoveRecursesAndClearsMoveGuard) {
  ModelForTest model;
  for (const auto& [name, m] : model.named_modules()) add_hook_to_module(*m, std::make_shared<ModelHook>());
  model.set_move_guard([](const Module&, Device) { throw Error("no"); });
  remove_hook_from_submodules(model);
  EXPECT_NE(model.hook(), nullptr);
  EXPECT_EQ(model.linear1->hook(), nullptr);
  EXPECT_EQ(model.linear2->hook(), nullptr);
  EXPECT_TRUE(static_cast<bool>(model.move_guard()));
  add_hook_to_module(*model.linear1, std::make_shared<ModelHook>());
  remove_hook_from_module(model, /*recurse=*/true);
  for (const auto& [name, m] : model.named_modules()) EXPECT_EQ(m->hook(), nullptr) << name;
  EXPECT_FALSE(static_cast<bool>(model.move_guard()));
  model.to(Device::cpu());
}

TEST(Hooks, SequentialHookDescribesItsParts) {
  SequentialHook seq({std::make_shared<ModelHook>(), std::make_shared<ModelHook>()});
  EXPECT_EQ(seq.describe(), "SequentialHook(ModelHook, ModelHook)");
  EXPECT_THROW(SequentialHook({nullptr}), Error);
}

TEST(Hooks, ReplaceForwardSkipsPreForwardAndPostForward) {
  ModelForTest model;
  std::vector<std::string> log;
  add_hook_to_module(*model.linear1, std::make_shared<RecordingHook>("a", &log));
  add_hook_to_module(*model.linear1, std::make_shared<ElsewhereHook>("b", &log), /*append=*/true);
  log.clear();
  const Tensor out = (*model.linear1)(input());
  EXPECT_THAT(log, ElementsAre("b.replace"));  // asked of every hook in turn; the first value wins
  EXPECT_EQ(out.shape(), input().shape());
  for (float v : out.to_vector<float>()) EXPECT_EQ(v, 0.0f);
  remove_hook_from_module(*model.linear1);
  add_hook_to_module(*model.linear1, std::make_shared<RecordingHook>("c", &log));
  log.clear();
  (void)(*model.linear1)(input());
  EXPECT_THAT(log, ElementsAre("c.pre", "c.post"));  // no replacement: the forward runs
}

}  // namespace
}  // namespace ferry::nn
