// ferry demo — the main job on a built-in default: a TinyLlama-shaped random-weight model (made once, cached),
// run with a cpu budget of a third of its size (the rest served from disk), tokens streamed, and the first
// steps' logits checked against a fully resident run.
#include <cmath>
#include <memory>

#include "cli.h"
#include "commands.h"
#include "demo_model.h"
#include "ferry/big_modeling/module_sizes.h"
#include "ferry/models/kv_cache.h"
#include "ferry/text/generate.h"
#include "run_model.h"

namespace ferry::cli {
namespace {

struct DemoOpts {
  std::string size = "tinyllama", prompt = "The ferry crossed the river at dawn and", cache_dir;
  std::string arch = "llama";
  int64_t n_tokens = 24, verify_steps = 4;
  double budget_fraction = 1.0 / 3.0;
  int threads = 0;
};

// Max |offloaded - resident| over the recorded steps: the resident model replays the prompt (an encoder-decoder
// model: encodes it and starts from its start token), then the generated tokens.
double verify_against_resident(const std::filesystem::path& folder, const text::GenerateResult& r, int threads) {
  ModelFlags flags;
  flags.model = folder.string();
  flags.device_map = "cpu";
  flags.threads = threads;
  LoadedModel resident = load_for_run(flags, nullptr);
  models::LanguageModel& model = *resident.model;
  models::SequenceStart start =
      model.start_sequence(std::vector<int64_t>(r.prompt_ids.begin(), r.prompt_ids.end()), DType::F32);
  models::StepRow row{start.state, 0};
  double max_diff = 0;
  for (std::size_t step = 0; step < r.step_logits.size(); ++step) {
    const std::vector<int64_t> input =
        step == 0 ? start.input : std::vector<int64_t>{r.generated_ids[step - 1]};
    row.tokens = static_cast<int64_t>(input.size());
    const Tensor ids = Tensor::from_vector(input, {row.tokens});
    std::vector<float> want = model.forward_step(ids, {&row, 1}, 1).to_vector<float>();
    const auto& got = r.step_logits[step];
    for (std::size_t i = 0; i < want.size(); ++i)
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - want[i])));
  }
  return max_diff;
}

}  // namespace

void add_demo_command(CLI::App& app) {
  auto o = std::make_shared<DemoOpts>();
  auto* cmd = app.add_subcommand("demo", "run a built-in TinyLlama-shaped random model with most weights on disk");
  cmd->add_option("--arch", o->arch, "llama (default) or t5 (an encoder-decoder, T5 v1.1 base's shape, ~0.5 GB bf16)");
  cmd->add_option("--size", o->size, "tinyllama (default, ~2.2 GB bf16) or tiny (a few MB); t5-base or tiny for --arch t5");
  cmd->add_option("-p,--prompt", o->prompt, "prompt text");
  cmd->add_option("-n,--n-predict", o->n_tokens, "tokens to generate (default 24)")->check(CLI::PositiveNumber);
  cmd->add_option("--verify-steps", o->verify_steps, "steps whose logits are checked against a resident run (default 4)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cpu-fraction", o->budget_fraction, "cpu budget as a fraction of the model (default 1/3)")
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--cache-dir", o->cache_dir, "where the demo model is kept (default $XDG_CACHE_HOME/ferry)");
  cmd->add_option("-t,--threads", o->threads, "CPU threads (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd->callback([o] {
    const bool t5 = o->arch == "t5";
    const DemoShape shape = demo_shape(t5 && o->size == "tinyllama" ? "t5-base" : o->size, o->arch);
    std::printf(
        "ferry demo — a %s-shaped %s with RANDOM weights: the generated text is meaningless.\n"
        "It shows the four verbs: build empty, plan, load into the plan, ferry offloaded weights per layer.\n\n",
        shape.name.c_str(), t5 ? "T5 (encoder-decoder)" : "Llama");
    std::fflush(stdout);
    if (t5 && o->prompt == DemoOpts{}.prompt) o->prompt = "translate English to German: The house is wonderful.";
    const auto folder = ensure_demo_model(shape, o->cache_dir.empty() ? ferry_cache_dir() : std::filesystem::path(o->cache_dir));

    ModelFlags flags;
    flags.model = folder.string();
    flags.device_map = "auto";
    flags.threads = o->threads;
    {
      const auto skeleton = build_skeleton(flags.model, DType::BF16);
      const int64_t total = compute_module_sizes(*skeleton).total();
      flags.max_memory = "cpu=" + std::to_string(static_cast<int64_t>(total * o->budget_fraction));
      std::printf("model folder: %s (%s)\ncpu budget:   %s of %s (the rest is read from disk for each forward)\n\n",
                  folder.string().c_str(), format_bytes(total).c_str(),
                  format_bytes(static_cast<int64_t>(total * o->budget_fraction)).c_str(), format_bytes(total).c_str());
      std::fflush(stdout);
    }
    LoadedModel lm = load_for_run(flags, stdout);
    text::Tokenizer tok = text::load_tokenizer(flags.model);
    text::GenerateOptions g;
    g.stop.max_new_tokens = static_cast<std::size_t>(o->n_tokens);
    g.stop.eos_token_ids = {};  // random weights: let it run the full length
    g.record_logits = static_cast<std::size_t>(std::min(o->verify_steps, o->n_tokens));
    // A decoder-only model continues the prompt; an encoder-decoder model answers it.
    std::printf("prompt: %s\n---\n%s", o->prompt.c_str(), t5 ? "" : o->prompt.c_str());
    std::fflush(stdout);
    auto print = [](std::string_view piece, text::TokenId) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    };
    auto r = text::generate(*lm.model, tok, o->prompt, g, print);
    const auto& t = r.timings;
    std::printf("\n---\nload %.2f s | prefill %zu tokens at %.2f tok/s | decode %zu tokens at %.2f tok/s\n",
                lm.load_seconds, t.prompt_tokens, t.prefill_tokens_per_second(), t.generated_tokens,
                t.decode_tokens_per_second());
    std::printf("streamed %s of weights from disk per forward\n", format_bytes(lm.streamed_bytes_per_forward).c_str());
    lm.model.reset();

    if (!r.step_logits.empty()) {
      std::printf("\nchecking the first %zu steps' logits against a fully resident run ...\n", r.step_logits.size());
      std::fflush(stdout);
      const double diff = verify_against_resident(folder, r, o->threads);
      std::printf("max |offloaded - resident| logit difference: %g%s\n", diff, diff == 0 ? " (bit-exact)" : "");
      if (!(diff <= 1e-3))
        throw Error("the offloaded run disagrees with the resident one (max difference " + std::to_string(diff) + ")",
                    "demo", "this is a bug; please report it");
    }
    std::printf(
        "\nRun a real Hugging Face model folder the same way:\n"
        "  ferry generate -m /path/to/TinyLlama-1.1B-Chat-v1.0 -p \"Hello\" -n 64 --device-map auto \\\n"
        "      --max-memory cpu=1GiB --offload-folder /tmp/ferry-offload\n");
  });
}

}  // namespace ferry::cli
