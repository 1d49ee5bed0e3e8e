// ferry generate -m FOLDER -p PROMPT — load (plan table, progress bar), stream tokens, report timings; with
// -i FILE, many prompts batched (generate_batch.cc).
#include <iostream>
#include <memory>

#include "chat.h"
#include "cli.h"
#include "commands.h"
#include "disk_io_report.h"
#include "ferry/big_modeling/pipeline.h"
#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/core/process_group.h"
#include "ferry/models/gguf_model.h"
#include "ferry/models/pipeline.h"
#include "ferry/text/generate.h"
#include "generate_batch.h"
#include "pipeline_report.h"
#include "run_model.h"

namespace ferry::cli {

text::GenerateOptions generate_options(const GenerateFlags& f, const LoadedModel& lm) {
  text::GenerateOptions o;
  o.sampling.do_sample = f.temp > 0;
  if (f.temp > 0) o.sampling.temperature = f.temp;
  o.sampling.top_k = static_cast<std::size_t>(f.top_k);
  o.sampling.top_p = f.top_p;
  o.sampling.min_p = f.min_p;
  o.sampling.repetition_penalty = f.repeat_penalty;
  o.sampling.seed = f.seed;
  o.stop.max_new_tokens = static_cast<std::size_t>(f.n_tokens);
  o.stop.max_length = static_cast<std::size_t>(f.model.context);
  o.stop.eos_token_ids = lm.eos_token_ids;
  o.stop.stop_strings = f.stop;
  o.add_special_tokens = !f.no_special;
  o.record_logits = static_cast<std::size_t>(f.logits);
  o.speculative = f.speculative.options(nullptr);
  return o;
}

namespace {

// `forwards`: the model calls of the run (the prefill, then one per token after the first, or per speculative step).
void print_stats(const LoadedModel& lm, const text::GenerateResult& r, std::size_t forwards, const DiskIoReport& io,
                 const H2dTraffic& h2d, bool speculative) {
  const auto& t = r.timings;
  std::fprintf(stderr, "\n\nload %.2f s | prefill %zu tokens, %.2f tok/s | decode %zu tokens, %.2f tok/s | stop: %s\n",
               lm.load_seconds, t.prompt_tokens, t.prefill_tokens_per_second(), t.generated_tokens,
               t.decode_tokens_per_second(), text::to_string(r.stop_reason));
  if (speculative) {
    const auto& sp = r.speculative;
    const double per_forward = sp.target_forwards > 0 && t.generated_tokens > 1
                                   ? double(t.generated_tokens - 1) / double(sp.target_forwards)
                                   : 0;
    std::fprintf(stderr,
                 "  speculative: %zu of %zu proposed tokens kept (%.0f %%), %.2f tokens per forward after the "
                 "prefill (%zu forwards)%s\n",
                 sp.accepted, sp.proposed, 100 * sp.acceptance_rate(), per_forward, sp.target_forwards,
                 sp.draft_forwards > 0 ? (", draft " + std::to_string(sp.draft_forwards) + " forwards").c_str() : "");
  }
  const bool streams_to_accelerator = main_accelerator(lm.plan.device_map).has_value();
  for (const auto& e : lm.usage.entries()) {
    const bool offloaded = e.device.is_disk() ||
                           (e.device.is_cpu() && lm.streamed_bytes_per_forward > 0 && streams_to_accelerator);
    std::fprintf(stderr, "  %-8s %s %s\n", e.device.str().c_str(), offloaded ? "offloaded" : "resident ",
                 format_bytes(e.bytes).c_str());
  }
  if (lm.streamed_bytes_per_forward > 0)
    std::fprintf(stderr, "  streamed %s per forward, %s in all (%zu forwards)\n",
                 format_bytes(lm.streamed_bytes_per_forward).c_str(),
                 format_bytes(lm.streamed_bytes_per_forward * static_cast<int64_t>(forwards)).c_str(), forwards);
  if (const std::string line = disk_io_text(io); !line.empty()) std::fprintf(stderr, "  %s\n", line.c_str());
  if (const std::string line = h2d_line(h2d); !line.empty()) std::fprintf(stderr, "  %s\n", line.c_str());
  if (const std::string line = pipeline_line(*lm.model, t.generated_tokens); !line.empty())
    std::fprintf(stderr, "  %s\n", line.c_str());
}

nlohmann::json result_json(const LoadedModel& lm, const text::ChatTemplate* chat, const text::GenerateResult& r,
                           const DiskIoReport& io, const H2dTraffic& h2d) {
  nlohmann::json j;
  j["model"] = loaded_model_json(lm, chat);
  j["prompt_ids"] = r.prompt_ids;
  j["generated_ids"] = r.generated_ids;
  j["text"] = r.text;
  j["stop_reason"] = text::to_string(r.stop_reason);
  j["timings"] = {{"load_s", lm.load_seconds},
                  {"prefill_s", r.timings.prefill_seconds},
                  {"decode_s", r.timings.decode_seconds},
                  {"prefill_tokens_per_s", r.timings.prefill_tokens_per_second()},
                  {"decode_tokens_per_s", r.timings.decode_tokens_per_second()}};
  j["device_map"] = nlohmann::json::parse(lm.plan.device_map.to_json());
  j["offload_io"] = lm.staged_reader ? "direct" : "mmap";
  j["disk_io"] = disk_io_json(io);
  j["prefetch"] = {{"setting", prefetch_name(lm.prefetch_setting)}};
  if (lm.prefetcher) {
    const PrefetchStatus s = lm.prefetcher->status();
    j["prefetch"].update({{"depth", s.depth}, {"reason", s.reason}, {"probes", s.probes}});
  }
  j["h2d"] = {{"bytes", h2d.bytes}, {"bytes_per_forward", h2d.bytes_per_forward}, {"gb_per_s", h2d.gb_per_s}};
  if (!r.step_logits.empty()) j["logits"] = r.step_logits;
  if (r.speculative.target_forwards > 0 || r.speculative.proposed > 0)
    j["speculative"] = speculative_json(r.speculative);
  if (lm.model->pipeline_leader()) j["pipeline"] = pipeline_json(*lm.model);  // activations and time, by rank
  return j;
}

// chat: the model's chat template, for --json (null: none); chat_ids: the --chat prompt, rendered.
// draft: the --draft-model, loaded (null: none).
void run_once(const GenerateFlags& f, const LoadedModel& lm, const std::optional<text::Tokenizer>& tok,
              const text::ChatTemplate* chat, const std::string& prompt, models::LanguageModel* draft,
              const std::vector<text::TokenId>* chat_ids = nullptr) {
  text::GenerateOptions o = generate_options(f, lm);
  o.speculative.draft = draft;
  std::optional<DiskIoMark> after_prompt;  // at the first token: the decode's reads are the ones after it
  auto stream = [&](std::string_view piece, text::TokenId) {
    if (!after_prompt) after_prompt = disk_io_mark(lm);
    if (!f.json) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    }
    return true;
  };
  text::GenerateResult r;
  const DiskIoMark io_before = disk_io_mark(lm);
  const std::uint64_t h2d_before = transfer_stats().host_to_device;
  if (!f.prompt_ids.empty() || chat_ids) {
    std::vector<text::TokenId> ids;
    if (chat_ids) ids = *chat_ids;
    if (!f.prompt_ids.empty())
      for (int64_t v : parse_int_list(f.prompt_ids, "--prompt-ids")) ids.push_back(static_cast<text::TokenId>(v));
    r = text::generate(*lm.model, tok ? &*tok : nullptr, ids, o, stream);
  } else {
    if (!tok)
      throw Error(ErrorKind::NotFound, "no tokenizer.json in the model folder", f.model.model,
                  "pass token ids with --prompt-ids");
    if (!f.json) std::printf("%s", prompt.c_str());
    // An encoder-decoder model's output is not a continuation.
    if (!f.json && lm.model->model_info().is_encoder_decoder) std::printf("\n");
    r = text::generate(*lm.model, *tok, prompt, o, stream);
  }
  // Per generated token (speculative decoding makes several per forward): the disk's bytes and the host→device ones.
  const std::size_t tokens = r.timings.generated_tokens > 0 ? r.timings.generated_tokens : 1;
  const bool speculative = o.speculative.enabled();
  const std::size_t forwards = speculative ? r.speculative.target_forwards + 1 : tokens;
  const double seconds = r.timings.prefill_seconds + r.timings.decode_seconds;
  const H2dTraffic h2d = h2d_traffic(h2d_before, tokens, seconds);
  DiskIoReport io = disk_io_report(lm, io_before, tokens, seconds);
  if (io.on_disk && after_prompt && tokens > 1)
    io.decode_bytes_per_token = disk_io_report(lm, *after_prompt, tokens - 1, r.timings.decode_seconds).bytes_per_token;
  if (f.json) {
    std::printf("%s\n", result_json(lm, chat, r, io, h2d).dump().c_str());
  } else {
    print_stats(lm, r, forwards, io, h2d, speculative);
  }
}

}  // namespace

void add_generate_command(CLI::App& app) {
  auto f = std::make_shared<GenerateFlags>();
  auto* cmd = app.add_subcommand("generate", "generate text from a Hugging Face model folder on any device map");
  f->model.add_to(*cmd);
  cmd->add_option("-p,--prompt", f->prompt, "the prompt text");
  cmd->add_option("--prompt-ids", f->prompt_ids, "the prompt as token ids: 1,2,3 (instead of -p)");
  cmd->add_option("-n,--n-predict,--max-new-tokens", f->n_tokens, "tokens to generate (default 128)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--temp,--temperature", f->temp, "sampling temperature; 0 = greedy (default)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", f->top_k, "keep the k most likely tokens (default 50; 0 = off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", f->top_p, "nucleus sampling mass (default 1 = off)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--min-p", f->min_p, "drop tokens below min-p × the top probability (default 0)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty,--repetition-penalty", f->repeat_penalty, "repetition penalty (default 1 = off)");
  cmd->add_option("-s,--seed", f->seed, "random seed for sampling (default 0)");
  cmd->add_option("--stop", f->stop, "stop when the text contains this string (repeatable)");
  cmd->add_flag("--json", f->json, "print prompt ids, generated ids, text and timings as one JSON object");
  cmd->add_option("--logits", f->logits, "with --json: add the last-position logits of the first N steps")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--interactive", f->interactive, "read prompts from stdin, one per line, one at a time");
  cmd->add_option("-i,--input", f->input,
                  "a file of prompts, one per line, or JSONL objects {\"prompt\" or \"prompt_ids\", and per-prompt "
                  "max_new_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed, stop, id}; - is stdin. "
                  "Generated in batches (--batch); results in input order");
  cmd->add_option("-b,--batch", f->batch, "with -i: sequences generated together (default 16)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-kv-memory", f->max_kv_memory,
                  "with -i: bytes the running sequences' KV caches may use (e.g. 4GiB; default: the --context "
                  "reservation, else half the RAM available after loading)");
  cmd->add_flag("--no-special", f->no_special, "do not add BOS to the prompt");
  cmd->add_option("--chat", f->chat, "a user message, put through the model's chat template (as a chat model expects)");
  cmd->add_option("--system", f->system, "with --chat: a system message before it");
  cmd->add_option("--chat-template", f->chat_template, "with --chat: a Jinja chat template file instead of the model's");
  f->speculative.add_to(*cmd, /*per_request=*/false);
  cmd->callback([f] {
    if (f->prompt.empty() && f->prompt_ids.empty() && !f->interactive && f->input.empty() && f->chat.empty())
      throw Error("no prompt given", "generate",
                  "pass -p TEXT, --chat MESSAGE, --prompt-ids 1,2,3, -i PROMPTS_FILE or --interactive");
    if (!f->chat.empty() && (!f->prompt.empty() || !f->prompt_ids.empty() || f->interactive || !f->input.empty()))
      throw Error("--chat is the prompt", "generate", "pass either --chat MESSAGE or -p / --prompt-ids / -i / --interactive");
    if (!f->input.empty() && (f->interactive || !f->prompt.empty() || !f->prompt_ids.empty()))
      throw Error("-i reads the prompts from a file", "generate",
                  "pass either -i FILE, or -p / --prompt-ids / --interactive");
    std::vector<BatchPrompt> batch_prompts;
    if (!f->input.empty()) batch_prompts = read_batch_prompts(f->input);  // before loading: a bad file fails fast
    std::optional<text::Tokenizer> tok;
    f->model.apply();
    if (models::is_gguf_file(f->model.model)) {
      // A GGUF tokenizer ferry cannot reproduce is an error only when text has to be tokenized.
      try {
        tok = text::load_tokenizer(f->model.model);
      } catch (const Error& e) {
        if (f->prompt_ids.empty()) throw;
      }
    } else if (std::filesystem::exists(std::filesystem::path(f->model.model) / "tokenizer.json")) {
      tok = text::load_tokenizer(f->model.model);
    }
    std::vector<text::TokenId> chat_ids;
    std::optional<text::ChatTemplate> chat;  // read once: --chat renders it, --json reports it
    if (!f->chat.empty()) {  // before loading: a model without a template fails fast
      if (!tok) throw Error("--chat needs the model's tokenizer", f->model.model, "use --prompt-ids");
      chat = text::load_chat_template(f->model.model, f->chat_template, &*tok);
      if (!chat) throw Error(no_chat_template_message(f->model.model), "generate --chat");
      nlohmann::json messages = nlohmann::json::array();
      if (!f->system.empty()) messages.push_back({{"role", "system"}, {"content", f->system}});
      messages.push_back({{"role", "user"}, {"content", f->chat}});
      chat_ids = chat_prompt_ids(*chat, *tok, messages);
    } else if (f->json) {
      try {
        chat = text::load_chat_template(f->model.model, f->chat_template, tok ? &*tok : nullptr);
      } catch (const Error&) {
        // A template that does not parse is reported by the commands that render one; here it is simply absent.
      }
    }
    const text::ChatTemplate* chat_template = chat ? &*chat : nullptr;
    // Under mpirun with a device map over ranks, every rank loads its part; rank 0 generates and prints, the others
    // follow its forwards. A failure on any rank ends them all (abort), naming the rank.
    const std::shared_ptr<ProcessGroup> world = world_process_group();
    try {
      LoadedModel lm = load_for_run(f->model, f->json || world->rank() != 0 ? nullptr : stderr);
      if (const auto& group = lm.model->pipeline_group(); group && group->rank() != 0) {
        models::follow_pipeline(*lm.model);
        return;
      }
      std::optional<LoadedModel> draft;
      if (!f->speculative.draft_model.empty()) draft = load_draft_model(f->speculative.draft_model, lm, f->model.model);
      models::LanguageModel* draft_model = draft ? draft->model.get() : nullptr;
      if (!chat_ids.empty()) {
        run_once(*f, lm, tok, chat_template, "", draft_model, &chat_ids);
        return;
      }
      if (!f->input.empty()) {
        run_batch(*f, lm, tok, batch_prompts, draft_model);
        return;
      }
      if (!f->interactive) {
        run_once(*f, lm, tok, chat_template, f->prompt, draft_model);
        return;
      }
      std::string line;
      while (true) {
        if (stdout_is_tty()) std::fprintf(stderr, "\n> ");
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        run_once(*f, lm, tok, chat_template, line, draft_model);
        std::printf("\n");
      }
    } catch (const std::exception& e) {
      if (world->size() > 1) world->abort(e.what());
      throw;
    }
  });
}

}  // namespace ferry::cli
