// tests/consumer: the README's C++ example, built against an installed ferry. It first writes a tiny random Llama
// folder (config.json + model.safetensors) into the folder given as argv[1], then loads it the README's way —
// init_empty_weights, from_config, load_checkpoint_and_dispatch with device_map "auto" and a cpu budget that sends
// layers to disk — and checks the logits against the model it wrote. Prints one line; exit status 0 when they agree.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "ferry/big_modeling/load_checkpoint.h"
#include "ferry/core/error.h"
#include "ferry/io/safetensors.h"
#include "ferry/models/auto_model.h"
#include "ferry/nn/empty_weights.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer EMPTY_FOLDER\n");
    return 2;
  }
  const std::filesystem::path folder = argv[1];
  try {
    // A tiny Llama with random weights, saved as transformers would lay it out.
    const char* config_text = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128,
      "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
      "num_key_value_heads": 2, "max_position_embeddings": 256, "rms_norm_eps": 1e-6, "tie_word_embeddings": false,
      "torch_dtype": "float32"})";
    std::ofstream(folder / "config.json") << config_text;
    auto written = ferry::models::AutoModelForCausalLM::from_config(ferry::models::ConfigJson::parse(config_text));
    ferry::io::StateDict weights;
    for (const auto& [name, tensor] : written->state_dict()) weights.insert(name, tensor);
    ferry::io::save_safetensors(weights, folder / "model.safetensors");
    const auto ids = ferry::Tensor::from_vector<int64_t>({1, 45, 7}, {3});
    const std::vector<float> expected = written->logits(ids).to_vector<float>();

    // The README's example.
    auto config = ferry::models::ConfigJson::read(folder);
    std::shared_ptr<ferry::models::CausalLM> model;
    { auto guard = ferry::nn::init_empty_weights(); model = ferry::models::AutoModelForCausalLM::from_config(config, ferry::DType::F32); }
    ferry::LoadAndDispatchOptions o{.device_map = std::string("auto"), .no_split_module_classes = {"LlamaDecoderLayer"}};
    o.max_memory = ferry::MaxMemory::from_flag("cpu=100KB"); o.offload_folder = folder / "offload";
    ferry::load_checkpoint_and_dispatch(*model, folder, o);
    auto logits = model->logits(ids);  // [3, 128]

    const std::vector<float> got = logits.to_vector<float>();
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - expected[i])));
    std::printf("consumer: logits [%lld, %lld] from a dispatched model, max difference %.3g\n",
                static_cast<long long>(logits.shape()[0]), static_cast<long long>(logits.shape()[1]), worst);
    return got.size() == expected.size() && worst < 1e-4 ? 0 : 1;
  } catch (const ferry::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
