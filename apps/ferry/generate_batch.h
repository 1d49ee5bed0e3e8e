// `ferry generate -i PROMPTS --batch N`: many prompts generated together by a text::BatchGenerator, results in
// input order (text, or JSONL with --json), a progress line on stderr, throughput at the end.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ferry/text/generate.h"
#include "ferry/text/prompt_line.h"
#include "run_model.h"
#include "speculative_flags.h"

namespace ferry::cli {

/// The flags of `ferry generate` (cmd_generate.cc).
struct GenerateFlags {
  ModelFlags model;
  std::string prompt, prompt_ids;
  int64_t n_tokens = 128;
  float temp = 0.0f;  // 0 = greedy
  int64_t top_k = 50;
  float top_p = 1.0f, min_p = 0.0f, repeat_penalty = 1.0f;
  uint64_t seed = 0;
  bool json = false, interactive = false, no_special = false;
  int64_t logits = 0;
  std::vector<std::string> stop;
  std::string input;          // -i: prompts file ("-" = stdin)
  int64_t batch = 16;         // --batch
  std::string max_kv_memory;  // --max-kv-memory
  std::string chat, system, chat_template;  // --chat MESSAGE (through the chat template), --system, --chat-template
  SpeculativeFlags speculative;             // --lookup, --draft-model, ...
};

/// The generation settings the flags ask for (the per-prompt defaults of a batch).
text::GenerateOptions generate_options(const GenerateFlags& f, const LoadedModel& lm);

/// A line of the prompts file (text/prompt_line.h).
using BatchPrompt = text::PromptLine;

/// Reads every line of `path` ("-": stdin). Throws ferry::Error when the file cannot be read or holds no line.
std::vector<BatchPrompt> read_batch_prompts(const std::string& path);

/// Generates every prompt; prints results in input order. Throws ferry::Error after printing everything when
/// some sequences failed (exit code 1), so that a script notices. `draft`: the --draft-model (null: none); with it or
/// --lookup each sequence speculates on its own.
void run_batch(const GenerateFlags& f, const LoadedModel& lm, const std::optional<text::Tokenizer>& tok,
               const std::vector<BatchPrompt>& prompts, models::LanguageModel* draft);

}  // namespace ferry::cli
