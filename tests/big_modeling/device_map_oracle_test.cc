// ferry's plans against Accelerate's own, on many seeded random module trees, budgets, dtypes and options.
//
// tests/reference/plan_oracle.py builds each tree on PyTorch's meta device and records what Accelerate plans
// (infer_auto_device_map, or a device_map mode resolved as load_checkpoint_and_dispatch does). This test builds
// the same trees from the recorded specs and requires ferry's plan to be identical, except where ferry departs
// from Accelerate on purpose — those cases are named, and there ferry's plan must still cover every tensor:
//   drops_buffers   Accelerate drops the direct buffers of a module it splits (#3956, #4014); ferry keeps them;
//   substring_tie   Accelerate's substring test puts tied "0.1.weight" inside module "1"; ferry uses components;
//   low_zero_ids    balanced_low_0 with GPUs-with-memory not numbered 0..n-1: Accelerate sums ids 1..n-1;
//   raises          Accelerate raised on the case; ferry plans it.
// Python: $FERRY_PYTHON, else <repo>/.venv/bin/python (scripts/venv makes it); skipped when neither works.
// More cases by hand: FERRY_PLAN_ORACLE_CASES=3000 FERRY_PLAN_ORACLE_SEED=7 ferry_big_modeling_tests
//   --gtest_filter='AccelerateOracle.*'.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/core/logging.h"
#include "ferry/nn/module.h"
#include "ferry/nn/module_tensors.h"

namespace ferry {
namespace {

using Json = nlohmann::ordered_json;

class SpecModule : public nn::Module {
 public:
  explicit SpecModule(std::string type) : type_(std::move(type)) {}
  std::string type_name() const override { return type_; }

 private:
  std::string type_;
};

DType spec_dtype(const Json& name) {
  auto d = dtype_from_safetensors(name.get<std::string>());
  if (!d) throw std::runtime_error("unknown dtype in oracle spec: " + name.dump());
  return *d;
}

Shape spec_shape(const Json& shape) { return shape.get<Shape>(); }

std::shared_ptr<nn::Module> build(const Json& spec) {
  auto m = std::make_shared<SpecModule>(spec.at("type").get<std::string>());
  for (const auto& p : spec.value("params", Json::array()))
    m->register_parameter(p[0].get<std::string>(), Tensor::empty(spec_shape(p[1]), spec_dtype(p[2]), Device::meta()));
  for (const auto& c : spec.value("children", Json::array())) m->register_module(c[0].get<std::string>(), build(c[1]));
  for (const auto& b : spec.value("buffers", Json::array()))
    m->register_buffer(b[0].get<std::string>(), Tensor::empty(spec_shape(b[1]), spec_dtype(b[2]), Device::meta()),
                       b[3].get<bool>());
  return m;
}

std::shared_ptr<nn::Module> build_model(const Json& c) {
  auto model = build(c.at("tree"));
  for (const auto& tie : c.at("ties")) {
    std::string dst = tie[0].get<std::string>();
    std::size_t dot = dst.rfind('.');
    nn::Module& owner = dot == std::string::npos ? *model : model->get_submodule(dst.substr(0, dot));
    auto slot = nn::find_tensor_slot(*model, tie[1].get<std::string>());
    owner.register_parameter(dot == std::string::npos ? dst : dst.substr(dot + 1), slot);
  }
  return model;
}

PlanOptions options_of(const Json& c) {
  PlanOptions o;
  o.max_memory = MaxMemory::from_json(c.at("max_memory").dump());
  o.no_split_module_classes = c.at("no_split_module_classes").get<std::vector<std::string>>();
  if (!c.at("dtype").is_null()) o.dtype = spec_dtype(c.at("dtype"));
  for (const auto& [name, dtype] : c.at("special_dtypes").items()) o.special_dtypes[name] = spec_dtype(dtype);
  o.offload_buffers = c.at("offload_buffers").get<bool>();
  o.fallback_allocation = c.at("fallback_allocation").get<bool>();
  o.clean_result = c.at("clean_result").get<bool>();
  return o;
}

std::vector<std::string> uncovered_tensors(const nn::Module& model, const DeviceMap& map) {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : nn::named_module_tensors(model, true, true))
    if (!map.device_for(name)) out.push_back(name);
  return out;
}

// Runs the oracle; nullopt (with the reason) when there is no working Python reference environment.
std::optional<Json> run_oracle(std::string& why_not) {
  std::string python;
  if (const char* env = std::getenv("FERRY_PYTHON"); env && *env)
    python = env;
  else
    python = std::string(FERRY_SOURCE_DIR) + "/.venv/bin/python";
  if (python.find('/') != std::string::npos && !std::filesystem::exists(python)) {
    why_not = "no Python reference environment at " + python + " (run scripts/venv, or set FERRY_PYTHON)";
    return std::nullopt;
  }
  // FERRY_PLAN_ORACLE_CASES / FERRY_PLAN_ORACLE_SEED widen the search by hand (defaults: 300 cases, fixed seed).
  const char* cases = std::getenv("FERRY_PLAN_ORACLE_CASES");
  const char* seed = std::getenv("FERRY_PLAN_ORACLE_SEED");
  std::string cmd = "'" + python + "' '" + std::string(FERRY_SOURCE_DIR) + "/tests/reference/plan_oracle.py' --cases " +
                    std::to_string(cases ? std::atoi(cases) : 300) +
                    (seed ? " --seed " + std::to_string(std::atoll(seed)) : std::string()) + " 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    why_not = "cannot start " + python;
    return std::nullopt;
  }
  std::string out;
  char buf[65536];
  while (std::size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  int status = pclose(pipe);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    why_not = python + " tests/reference/plan_oracle.py exited with status " +
              std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
              (WIFEXITED(status) && WEXITSTATUS(status) == 3 ? " (torch/accelerate not importable)" : "");
    return std::nullopt;
  }
  return Json::parse(out);
}

struct Tally {
  int equal = 0;
  std::map<std::string, int> named;  // deliberate differences and Accelerate failures, by flag
  std::vector<std::string> mismatches;
};

void compare_case(const Json& c, Tally& tally) {
  const Json& acc = c.at("accelerate");
  std::string name = c.at("name").get<std::string>();
  std::string mode = c.at("mode").get<std::string>();
  auto model = build_model(c);
  PlanOptions o = options_of(c);
  DeviceMap ours;
  try {
    ScopedLogCapture quiet;  // "Device cuda:N is not available" etc.
    ours = mode == "infer" ? infer_auto_device_map(*model, o) : plan_device_map(*model, parse_device_map_mode(mode), o);
  } catch (const std::exception& e) {
    tally.mismatches.push_back(name + ": ferry threw: " + e.what());
    return;
  }
  if (auto missing = uncovered_tensors(*model, ours); !missing.empty()) {
    tally.mismatches.push_back(name + ": ferry's plan leaves " + missing.front() + " without a device");
    return;
  }
  const auto& flags = acc.at("flags");
  if (!flags.empty()) {
    for (const auto& f : flags) ++tally.named[f.get<std::string>()];
    return;
  }
  if (acc.contains("balanced")) {
    ScopedLogCapture quiet;
    MaxMemory ours_balanced = get_balanced_memory(*model, o.max_memory, o.no_split_module_classes, o.dtype, {},
                                                  mode == "balanced_low_0");
    for (const auto& [key, value] : acc.at("balanced").items()) {
      auto mine = ours_balanced.get(Device::parse(key));
      if (!mine || static_cast<double>(*mine) != value.get<double>())
        tally.mismatches.push_back(name + ": balanced budget of " + key + " is " +
                                   (mine ? std::to_string(*mine) : "missing") + ", Accelerate " + value.dump());
    }
  }
  DeviceMap theirs = DeviceMap::from_json(acc.at("device_map").dump());
  if (ours == theirs) {
    ++tally.equal;
    return;
  }
  tally.mismatches.push_back(name + " (" + mode + ", max_memory " + c.at("max_memory").dump() + "): ferry " +
                             ours.to_json() + " vs Accelerate " + theirs.to_json());
}

TEST(AccelerateOracle, PlansMatchAccelerateExceptWhereFerryFixesIt) {
  std::string why_not;
  std::optional<Json> oracle = run_oracle(why_not);
  if (!oracle) GTEST_SKIP() << why_not;
  Tally tally;
  const Json& cases = oracle->at("cases");
  for (const auto& c : cases) compare_case(c, tally);

  std::string named;
  for (const auto& [flag, n] : tally.named) named += " " + flag + "=" + std::to_string(n);
  std::cout << "Accelerate " << oracle->at("accelerate_version").get<std::string>() << " oracle: " << cases.size()
            << " cases, " << tally.equal << " identical plans, deliberate differences / Accelerate failures:"
            << (named.empty() ? " none" : named) << ", mismatches: " << tally.mismatches.size() << "\n";
  for (std::size_t i = 0; i < tally.mismatches.size() && i < 10; ++i) ADD_FAILURE() << tally.mismatches[i];
  EXPECT_TRUE(tally.mismatches.empty());
  // The comparison must mean something: most cases are compared plan for plan.
  EXPECT_GT(tally.equal, static_cast<int>(cases.size()) * 3 / 5);
}

}  // namespace
}  // namespace ferry
