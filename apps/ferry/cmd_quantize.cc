// ferry quantize -m SOURCE -o OUT.gguf --type q4_k_m — a Hugging Face folder or GGUF file written as a GGUF llama.cpp
// loads, its weights quantized (models::export_gguf; llama.cpp: convert_hf_to_gguf.py + llama-quantize).
#include <chrono>
#include <memory>

#include "cli.h"
#include "commands.h"
#include "ferry/core/error.h"
#include "ferry/core/thread_pool.h"
#include "ferry/models/gguf_model.h"
#include "ferry/text/pretrained.h"

namespace ferry::cli {

void add_quantize_command(CLI::App& app) {
  struct Opts {
    std::string model, out, type = "q4_k_m", name;
    int threads = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("quantize", "write a model (HF folder or GGUF) as a quantized GGUF file llama.cpp loads");
  cmd->add_option("-m,--model", o->model,
                  "Hugging Face folder or GGUF file (Llama, Mistral, Qwen2, Qwen3, Mixtral, Qwen2-MoE, Qwen3-MoE)")
      ->required();
  cmd->add_option("-o,--out", o->out, "the GGUF file to write")->required();
  cmd->add_option("--type", o->type,
                  "q4_k_m (default), q5_k_m, q6_k, q8_0, q4_0, q4_1, q5_0, q5_1, f16, bf16 or f32");
  cmd->add_option("--name", o->name, "general.name in the file (default: the source's name)");
  cmd->add_option("-t,--threads", o->threads, "CPU threads (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->callback([o] {
    if (o->threads > 0) set_num_threads(o->threads);
    if (!std::filesystem::exists(o->model))
      throw Error(ErrorKind::NotFound, "model not found", o->model,
                  "pass -m with a Hugging Face folder or a .gguf file");
    const auto t0 = std::chrono::steady_clock::now();
    // The model's chat template goes into the file (a GGUF source's is copied with its vocabulary).
    const std::optional<text::ChatTemplate> chat =
        models::is_gguf_file(o->model) ? std::nullopt : text::load_chat_template(o->model);
    const models::GgufExportReport r = models::export_gguf(
        o->model, o->out, {.type = o->type, .name = o->name, .chat_template = chat ? chat->source() : ""});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::string types;
    for (const auto& [t, n] : r.tensors_per_type) types += (types.empty() ? "" : ", ") + t + " " + std::to_string(n);
    std::printf("wrote %s: %s of tensors (%s) in %.1f s\ntokenizer: %s\n", o->out.c_str(),
                format_bytes(static_cast<int64_t>(r.bytes)).c_str(), types.c_str(), s, r.tokenizer.c_str());
  });
}

}  // namespace ferry::cli
