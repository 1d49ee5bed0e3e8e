// ferry generate -i PROMPTS --batch N (see generate_batch.h).
#include "generate_batch.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "ferry/big_modeling/max_memory.h"
#include "ferry/core/error.h"
#include "ferry/text/batch_generate.h"
#include "pipeline_report.h"

namespace ferry::cli {
namespace {

using Clock = std::chrono::steady_clock;

nlohmann::json result_json(const BatchPrompt& p, const text::SequenceResult& r) {
  nlohmann::json j;
  j["index"] = p.line - 1;
  if (!p.id.is_null()) j["id"] = p.id;
  if (!r.ok()) j["error"] = r.error;
  j["prompt_ids"] = r.result.prompt_ids;
  j["generated_ids"] = r.result.generated_ids;
  j["text"] = r.result.text;
  j["stop_reason"] = text::to_string(r.result.stop_reason);
  j["timings"] = {{"prefill_s", r.result.timings.prefill_seconds}, {"decode_s", r.result.timings.decode_seconds}};
  if (!r.result.step_logits.empty()) j["logits"] = r.result.step_logits;
  if (r.result.speculative.target_forwards > 0) j["speculative"] = speculative_json(r.result.speculative);
  return j;
}

// The KV cache budget: --max-kv-memory, else --batch sequences of --context tokens, at most half the RAM available.
std::size_t kv_budget(const GenerateFlags& f, const LoadedModel& lm) {
  if (!f.max_kv_memory.empty()) {
    try {
      return static_cast<std::size_t>(convert_file_size_to_int(f.max_kv_memory));
    } catch (const Error& e) {
      throw e.with_context("--max-kv-memory");
    }
  }
  // --context: every running sequence may fill it; up to half the RAM still available either way.
  const auto half_ram = static_cast<std::size_t>(cacheable_ram_bytes() / 2);
  if (f.model.context <= 0) return half_ram;
  const int64_t all = kv_cache_bytes(lm.model->model_info(), f.model.context) * f.batch;
  return std::min(static_cast<std::size_t>(all), half_ram);
}

// "sequences 12/100 done, 32 running | 412 tokens, 85.3 tok/s": redrawn in place on a terminal, else a line per
// tenth of the sequences.
class BatchProgress {
 public:
  explicit BatchProgress(std::size_t total) : total_(total), tty_(stderr_is_tty()), start_(Clock::now()) {}
  void update(std::size_t done, int64_t running, std::size_t tokens) {
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    const double rate = s > 0 ? static_cast<double>(tokens) / s : 0;
    if (tty_) {
      std::fprintf(stderr, "\r\x1b[Ksequences %zu/%zu done, %lld running | %zu tokens, %.1f tok/s", done, total_,
                   static_cast<long long>(running), tokens, rate);
    } else if (done * 10 / std::max<std::size_t>(total_, 1) > last_tenth_ || done == total_) {
      last_tenth_ = done * 10 / std::max<std::size_t>(total_, 1);
      if (done != last_done_)
        std::fprintf(stderr, "sequences %zu/%zu done | %zu tokens, %.1f tok/s\n", done, total_, tokens, rate);
    }
    last_done_ = done;
    std::fflush(stderr);
  }
  void finish() {
    if (tty_) std::fprintf(stderr, "\n");
  }

 private:
  std::size_t total_;
  bool tty_;
  Clock::time_point start_;
  std::size_t last_tenth_ = 0, last_done_ = static_cast<std::size_t>(-1);
};

}  // namespace

std::vector<BatchPrompt> read_batch_prompts(const std::string& path) {
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path);
    if (!file) {
      std::error_code ec;  // NotFound only when the path is not there (exists() clears ec then)
      const bool missing = !std::filesystem::exists(path, ec) && !ec;
      throw Error(missing ? ErrorKind::NotFound : ErrorKind::InvalidValue, "cannot open the prompts file", path,
                  "check the path given to -i");
    }
    in = &file;
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(*in, line);) lines.push_back(std::move(line));
  // Blank lines at the end of the file are not prompts (a blank line between prompts is an empty prompt).
  while (!lines.empty() && lines.back().find_first_not_of(" \t\r") == std::string::npos) lines.pop_back();
  std::vector<BatchPrompt> prompts;
  for (std::size_t i = 0; i < lines.size(); ++i)
    prompts.push_back(text::parse_prompt_line(lines[i], static_cast<int64_t>(i + 1)));
  if (prompts.empty()) throw Error("the prompts file has no prompt", path == "-" ? "stdin" : path, "one prompt per line");
  return prompts;
}

void run_batch(const GenerateFlags& f, const LoadedModel& lm, const std::optional<text::Tokenizer>& tok,
               const std::vector<BatchPrompt>& prompts, models::LanguageModel* draft) {
  text::BatchOptions bo;
  bo.max_batch_size = f.batch;
  bo.max_kv_cache_bytes = kv_budget(f, lm);
  const text::Tokenizer* tp = tok ? &*tok : nullptr;
  text::BatchGenerator gen(*lm.model, tp, bo);
  text::GenerateOptions defaults = generate_options(f, lm);
  defaults.speculative.draft = draft;

  // Sequences in input order; a line that cannot even be queued keeps its error as its result.
  std::map<std::size_t, text::SequenceResult> early;  // input index -> result, for lines refused here
  std::map<text::SequenceId, std::size_t> index_of;
  for (std::size_t i = 0; i < prompts.size(); ++i) {
    const BatchPrompt& p = prompts[i];
    text::SequenceResult refused;
    refused.error = p.error;
    if (refused.error.empty()) {
      try {
        text::GenerateOptions o = defaults;
        text::apply_generation_settings(p.settings, o.sampling, o.stop);
        std::vector<text::TokenId> ids;
        if (p.ids) {
          ids = *p.ids;
        } else if (!tok) {
          throw Error("a text prompt needs the model's tokenizer (tokenizer.json)", f.model.model,
                      "give \"prompt_ids\" instead");
        } else {
          ids = tok->encode(*p.text, o.add_special_tokens);
        }
        index_of[gen.add(std::move(ids), std::move(o))] = i;
        continue;
      } catch (const Error& e) {
        refused.error = "line " + std::to_string(p.line) + ": " + e.what();
      }
    }
    early[i] = std::move(refused);
  }
  if (!f.json) {
    const int64_t per_token = lm.model->model_info().kv_cache_bytes_per_token(DType::F32);
    std::fprintf(stderr, "batch: %zu prompts, up to %lld at once; KV cache budget %s (%lld tokens)\n", prompts.size(),
                 static_cast<long long>(f.batch), format_bytes(static_cast<int64_t>(bo.max_kv_cache_bytes)).c_str(),
                 static_cast<long long>(static_cast<int64_t>(bo.max_kv_cache_bytes) / std::max<int64_t>(per_token, 1)));
  }

  // Results are printed in input order: each as soon as every earlier one is out.
  std::map<std::size_t, text::SequenceResult> ready = std::move(early);
  std::size_t next_out = 0, done = 0, tokens = 0, failed = 0;
  text::SpeculativeStats speculative;  // summed over the sequences
  auto flush = [&] {
    while (true) {
      auto it = ready.find(next_out);
      if (it == ready.end()) break;
      const text::SequenceResult& r = it->second;
      const BatchPrompt& p = prompts[next_out];
      if (!r.ok()) ++failed;
      if (f.json) {
        std::printf("%s\n", result_json(p, r).dump().c_str());
      } else if (!r.ok()) {
        std::printf("--- %zu: error: %s\n", next_out, r.error.c_str());
      } else {
        std::printf("--- %zu (%s)\n%s%s\n", next_out, text::to_string(r.result.stop_reason),
                    p.text ? p.text->c_str() : "", r.result.text.c_str());
      }
      ready.erase(it);
      ++next_out;
    }
    std::fflush(stdout);
  };
  done = ready.size();
  flush();
  BatchProgress progress(prompts.size());
  const auto t0 = Clock::now();
  std::size_t steps = 0;
  while (gen.has_work()) {
    for (auto& r : gen.step()) {
      tokens += r.result.generated_ids.size();
      speculative.proposed += r.result.speculative.proposed;
      speculative.accepted += r.result.speculative.accepted;
      ++done;
      ready[index_of.at(r.id)] = std::move(r);
    }
    ++steps;
    if (!f.json) progress.update(done, gen.running(), tokens);
    flush();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!f.json) {
    progress.finish();
    std::fprintf(stderr, "\n%zu sequences (%zu failed) | %zu tokens generated in %.2f s, %.2f tok/s | %zu steps\n",
                 prompts.size(), failed, tokens, seconds, seconds > 0 ? static_cast<double>(tokens) / seconds : 0,
                 steps);
    if (defaults.speculative.enabled())
      std::fprintf(stderr, "speculative: %zu of %zu proposed tokens kept (%.0f %%), each sequence on its own\n",
                   speculative.accepted, speculative.proposed, 100.0 * speculative.acceptance_rate());
    if (const std::string line = pipeline_line(*lm.model, tokens); !line.empty())
      std::fprintf(stderr, "%s\n", line.c_str());
  }
  if (failed > 0)
    throw Error(std::to_string(failed) + " of " + std::to_string(prompts.size()) + " prompts failed", "generate",
                "their errors are in the output; the other results are complete");
}

}  // namespace ferry::cli
