// The cost-aware plan (issue 37): device_map "fast" / PlanStrategy::Fast fills the fastest memory with what every
// generated token reads — a seq2seq model's decoder, head and tied embeddings before its encoder and its cross-
// attention key and value projections (prompt modules), dense parts before experts — and never reads more bytes per
// generated token than Accelerate's plan for the same budget. Generation under it equals the resident model's.
#include <gtest/gtest.h>

#include <random>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/big_modeling/module_sizes.h"
#include "ferry/big_modeling/token_reads.h"
#include "ferry/core/error.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/init.h"
#include "ferry/text/batch_generate.h"
#include "ferry/text/generate.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

std::shared_ptr<LanguageModel> skeleton(const nlohmann::json& config) {
  auto guard = nn::init_empty_weights();
  return language_model_from_config(ConfigJson::from_json(config), DType::F32);
}

nlohmann::json t5_v10_config() {  // relu, the head tied to the shared embedding
  nlohmann::json c = test::tiny_t5_config();
  c["feed_forward_proj"] = "relu";
  c["tie_word_embeddings"] = true;
  return c;
}

// What `strategy` plans for `model` on {cpu: cpu_bytes, disk} (and a GPU first when gpu_bytes > 0).
DeviceMap plan(const LanguageModel& model, int64_t cpu_bytes, PlanStrategy strategy, int64_t gpu_bytes = 0) {
  PlanOptions o;
  std::vector<std::pair<std::string, std::string>> budget;
  if (gpu_bytes > 0) budget.emplace_back("0", std::to_string(gpu_bytes));
  budget.emplace_back("cpu", std::to_string(cpu_bytes));
  o.max_memory = MaxMemory::parse(budget);
  o.no_split_module_classes = {model.model_info().block_class};
  if (model.model_info().experts.num_experts > 0) o.expert_module_classes = {model.model_info().experts.expert_class};
  o.prompt_modules = model.model_info().prompt_modules;
  o.strategy = strategy;
  return infer_auto_device_map(model, o);
}

std::vector<TokenReads> reads(const LanguageModel& model, const DeviceMap& map, Device compute = Device::cpu()) {
  return per_token_reads(model, map, compute, model.model_info().read_profile());
}

int64_t disk_bytes_per_token(const std::vector<TokenReads>& r) {
  for (const TokenReads& row : r)
    if (row.device.is_disk()) return static_cast<int64_t>(row.expected_bytes);
  return 0;
}

TEST(FastPlan, T5PromptModulesAreTheEncoderAndTheCrossAttentionKeysAndValues) {
  const auto t5 = skeleton(test::tiny_t5_config());  // 2 encoder and 3 decoder blocks
  const auto& p = t5->model_info().prompt_modules;
  ASSERT_EQ(p.size(), 1u + 2 * 3);
  EXPECT_EQ(p[0], "encoder");
  EXPECT_EQ(p[1], "decoder.block.0.layer.1.EncDecAttention.k");
  EXPECT_EQ(p[6], "decoder.block.2.layer.1.EncDecAttention.v");
  for (const std::string& name : p) EXPECT_NE(t5->find_submodule(name), nullptr) << name;
  EXPECT_TRUE(skeleton(test::tiny_llama_config())->model_info().prompt_modules.empty());
}

// Half of T5 in RAM: Accelerate's order gives it the encoder (run once per prompt) and sends the decoder to disk;
// the fast plan keeps the decoder's per-token parts in RAM and reads the encoder from disk once per prompt.
TEST(FastPlan, T5KeepsTheDecoderInRamAndTheEncoderOnDisk) {
  const auto t5 = skeleton(test::tiny_t5_config());
  const int64_t total = compute_module_sizes(*t5)[""];
  const DeviceMap accelerate = plan(*t5, total / 2, PlanStrategy::Accelerate);
  const DeviceMap fast = plan(*t5, total / 2, PlanStrategy::Fast);
  EXPECT_EQ(accelerate.device_for("encoder.block.0.layer.0.SelfAttention.q.weight"), Device::cpu());
  EXPECT_EQ(accelerate.device_for("decoder.block.2.layer.2.DenseReluDense.wo.weight"), Device::disk());
  EXPECT_EQ(fast.device_for("decoder.block.0.layer.0.SelfAttention.q.weight"), Device::cpu());
  EXPECT_EQ(fast.device_for("decoder.block.0.layer.1.EncDecAttention.k.weight"), Device::disk());
  EXPECT_EQ(fast.device_for("encoder.block.1.layer.1.DenseReluDense.wo.weight"), Device::disk());
  // The shared embedding, tied only to the two lookups, is read by the row: it goes to disk last.
  EXPECT_EQ(fast.device_for("shared.weight"), Device::disk());
  EXPECT_EQ(plan(*skeleton(t5_v10_config()), total / 2, PlanStrategy::Fast).device_for("shared.weight"), Device::cpu())
      << "tied to the head, it is read whole for every token";
  const auto a = reads(*t5, accelerate), f = reads(*t5, fast);
  EXPECT_LT(disk_bytes_per_token(f), disk_bytes_per_token(a) / 2) << accelerate.to_json() << "\n" << fast.to_json();
  // Per prompt, both read whatever lies on disk once.
  int64_t a_prompt = 0, f_prompt = 0;
  for (const TokenReads& r : a) a_prompt += r.prompt_read_bytes();
  for (const TokenReads& r : f) f_prompt += r.prompt_read_bytes();
  EXPECT_GT(a_prompt, 0);
  EXPECT_GT(f_prompt, 0);
  // The prompt modules on disk are counted once per prompt, not per token.
  for (const TokenReads& r : f)
    if (r.device.is_disk()) {
      EXPECT_GT(r.prompt_bytes, 0);
    }
}

// Decoder-only dense models whose embeddings are tied to the head read everything whole for every token: the fast plan
// is Accelerate's, for any budget.
TEST(FastPlan, DecoderOnlyModelsWithTiedEmbeddingsGetAcceleratesPlan) {
  nlohmann::json llama_tied = test::tiny_llama_config();
  llama_tied["tie_word_embeddings"] = true;
  for (const auto& config : {llama_tied, test::tiny_qwen2_config()}) {
    const auto model = skeleton(config);
    ASSERT_TRUE(row_lookup_tables(*model).empty());
    const int64_t total = compute_module_sizes(*model)[""];
    for (int64_t cpu : {total / 5, total / 2, total * 2})
      EXPECT_EQ(plan(*model, cpu, PlanStrategy::Fast).to_json(), plan(*model, cpu, PlanStrategy::Accelerate).to_json())
          << config["model_type"] << " " << cpu;
  }
}

// An untied embedding costs a row per token wherever it is: the fast plan places it after the layers, which then
// fill the RAM it leaves, and reads less per token; tables tied to the head are read whole and stay in order.
TEST(FastPlan, UntiedEmbeddingsGoLastAndAreCountedByTheRow) {
  const auto llama = skeleton(test::tiny_llama_config());  // untied
  EXPECT_EQ(row_lookup_tables(*llama), (std::vector<std::string>{"model.embed_tokens.weight"}));
  EXPECT_EQ(row_lookup_tables(*skeleton(test::tiny_gpt2_config())),
            (std::vector<std::string>{"transformer.wpe.weight"}))
      << "wte is tied to the head; the position table is not";
  const auto t5_tables = row_lookup_tables(*skeleton(test::tiny_t5_config()));
  EXPECT_EQ(t5_tables,
            (std::vector<std::string>{"decoder.embed_tokens.weight", "encoder.embed_tokens.weight", "shared.weight"}));
  EXPECT_TRUE(row_lookup_tables(*skeleton(t5_v10_config())).empty());

  ModuleSizes sizes = compute_module_sizes(*llama);
  const int64_t total = sizes[""], table = sizes["model.embed_tokens"];
  int gained = 0;
  for (int64_t cpu = total / 8; cpu < total; cpu += total / 16) {
    const DeviceMap a = plan(*llama, cpu, PlanStrategy::Accelerate), f = plan(*llama, cpu, PlanStrategy::Fast);
    const auto ra = reads(*llama, a), rf = reads(*llama, f);
    EXPECT_LE(disk_bytes_per_token(rf), disk_bytes_per_token(ra)) << cpu;
    if (disk_bytes_per_token(rf) < disk_bytes_per_token(ra)) {
      ++gained;
      EXPECT_EQ(f.device_for("model.embed_tokens.weight"), Device::disk()) << f.to_json();
    }
    for (const TokenReads& r : ra)  // the table on disk costs one row (32 f32) per token, not its 96 rows
      if (r.device.is_disk() && a.device_for("model.embed_tokens.weight") == Device::disk()) {
        EXPECT_EQ(r.table_bytes, table);
        EXPECT_EQ(r.table_row_bytes, 32 * 4);
      }
  }
  EXPECT_GT(gained, 0);
}

// The property the issue names: for random budgets (cpu alone, and a GPU before it) and every kind of model, the
// fast plan reads no more bytes per generated token off the compute device than Accelerate's plan, from disk and in
// all.
TEST(FastPlan, NeverReadsMorePerTokenThanAcceleratesPlan) {
  std::mt19937_64 rng(37);
  int strictly_less = 0;
  for (const auto& config : {test::tiny_t5_config(), t5_v10_config(), test::tiny_llama_config(),
                             test::tiny_qwen2_config(), test::tiny_mixtral_config(), test::tiny_qwen2_moe_config()}) {
    const auto model = skeleton(config);
    const int64_t total = compute_module_sizes(*model)[""];
    std::uniform_int_distribution<int64_t> bytes(0, total * 5 / 4);
    for (int i = 0; i < 150; ++i) {
      const int64_t cpu = bytes(rng), gpu = i % 3 == 0 ? bytes(rng) / 2 : 0;
      const Device compute = gpu > 0 ? Device::cuda(0) : Device::cpu();
      const DeviceMap a = plan(*model, cpu, PlanStrategy::Accelerate, gpu);
      const DeviceMap f = plan(*model, cpu, PlanStrategy::Fast, gpu);
      const auto ra = reads(*model, a, compute), rf = reads(*model, f, compute);
      const std::string what = std::string(config["model_type"]) + " cpu=" + std::to_string(cpu) +
                               " gpu=" + std::to_string(gpu) + "\n" + a.to_json() + "\n" + f.to_json();
      EXPECT_LE(disk_bytes_per_token(rf), disk_bytes_per_token(ra)) << what;
      EXPECT_LE(token_read_bytes(rf), token_read_bytes(ra) + 1e-9) << what;
      strictly_less += token_read_bytes(rf) < token_read_bytes(ra);
    }
  }
  EXPECT_GT(strictly_less, 50);  // the T5 budgets between "all fits" and "nothing fits" gain
}

TEST(FastPlan, IsADeviceMapMode) {
  EXPECT_EQ(parse_device_map_mode("fast"), DeviceMapMode::Fast);
  EXPECT_EQ(device_map_mode_name(DeviceMapMode::Fast), "fast");
  const auto t5 = skeleton(test::tiny_t5_config());
  PlanOptions o;
  o.max_memory = MaxMemory::from_flag("cpu=" + std::to_string(compute_module_sizes(*t5)[""] / 3));
  o.no_split_module_classes = {"T5Block"};
  o.prompt_modules = t5->model_info().prompt_modules;
  EXPECT_EQ(plan_device_map(*t5, DeviceMapMode::Fast, o).to_json(),
            plan(*t5, compute_module_sizes(*t5)[""] / 3, PlanStrategy::Fast).to_json());
  try {
    parse_device_map_mode("fastest");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fast'"), std::string::npos) << e.what();
  }
}

// from_pretrained(device_map="fast") with most of T5 on disk: greedy and sampled generation, alone and batched, give
// the resident model's tokens and logits bit for bit.
TEST(FastPlan, T5GeneratesAsResident) {
  for (const auto& config : {test::tiny_t5_config(), t5_v10_config()}) {
    test::TempDir dir, offload("ferry-offload");
    nn::manual_seed(9);
    test::write_random_seq2seq_folder(dir.path(), config);
    auto resident = AutoModelForSeq2SeqLM::from_pretrained(dir.path());
    const int64_t total = compute_module_sizes(*resident)[""];
    auto fast = AutoModelForSeq2SeqLM::from_pretrained(dir.path(), {.device_map = std::string("fast"),
                                                                    .max_memory = MaxMemory::from_flag(
                                                                        "cpu=" + std::to_string(total / 3)),
                                                                    .offload_folder = offload.path()});
    ASSERT_TRUE(fast->hf_device_map().has_value());
    EXPECT_EQ(fast->hf_device_map()->device_for("encoder.block.0.layer.0.SelfAttention.q.weight"), Device::disk());
    EXPECT_EQ(fast->hf_device_map()->device_for("decoder.block.0.layer.0.SelfAttention.q.weight"), Device::cpu());
    const std::vector<std::vector<text::TokenId>> prompts = {{5, 9, 13, 2, 40, 1}, {7, 1}, {3, 3, 3, 3, 3, 1}};
    std::vector<text::GenerateOptions> options(prompts.size());
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      options[i].stop.max_new_tokens = 6;
      options[i].record_logits = 6;
      if (i == 1) options[i].sampling = {.do_sample = true, .temperature = 1.3f, .seed = 5};
    }
    text::BatchGenerator batch(*fast, nullptr, {.max_batch_size = 2});
    for (std::size_t i = 0; i < prompts.size(); ++i) batch.add(prompts[i], options[i]);
    const auto batched = batch.run();
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      const auto want = text::generate(*resident, nullptr, prompts[i], options[i]);
      const auto got = text::generate(*fast, nullptr, prompts[i], options[i]);
      EXPECT_EQ(got.generated_ids, want.generated_ids) << i;
      EXPECT_EQ(got.step_logits, want.step_logits) << i;
      ASSERT_TRUE(batched[i].ok()) << batched[i].error;
      EXPECT_EQ(batched[i].result.generated_ids, want.generated_ids) << i;
    }
  }
}

}  // namespace
}  // namespace ferry::models
