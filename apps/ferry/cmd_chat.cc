// ferry chat -m FOLDER — an interactive conversation in the terminal, as llama.cpp's llama-cli -cnv and `ollama run`:
// each line you type is a user message; the whole conversation goes through the model's chat template and the reply
// streams as it is generated. The history is kept while it fits the context (the oldest turns are dropped first,
// the system message stays). /reset starts over, /exit (or end of input) quits.
#include <iostream>
#include <memory>

#include "chat.h"
#include "cli.h"
#include "commands.h"
#include "ferry/core/error.h"
#include "ferry/text/generate.h"
#include "generate_batch.h"
#include "run_model.h"

namespace ferry::cli {

namespace {

struct ChatFlags {
  GenerateFlags gen;
  std::string system, chat_template;
  bool verbose_prompt = false;
};

void run_chat(ChatFlags& f) {
  f.gen.model.apply();
  const text::Tokenizer tok = text::load_tokenizer(f.gen.model.model);
  std::optional<text::ChatTemplate> chat = text::load_chat_template(f.gen.model.model, f.chat_template, &tok);
  if (!chat) throw Error(no_chat_template_message(f.gen.model.model), "chat");
  LoadedModel lm = load_for_run(f.gen.model, stderr);
  if (lm.model->model_info().is_encoder_decoder)
    throw Error("ferry chat needs a decoder-only chat model", f.gen.model.model, "use ferry generate -p");
  const int64_t context = f.gen.model.context > 0 ? std::min(f.gen.model.context, lm.model->context_length())
                                                 : lm.model->context_length();
  text::GenerateOptions o = generate_options(f.gen, lm);
  o.add_special_tokens = false;

  nlohmann::json history = nlohmann::json::array();
  if (!f.system.empty()) history.push_back({{"role", "system"}, {"content", f.system}});
  const std::size_t keep = history.size();  // the system message is never dropped
  const bool tty = stdout_is_tty();
  std::fprintf(stderr, "chat: type a message; /reset starts over, /exit or Ctrl-D quits\n");
  std::string line;
  while (true) {
    if (tty) std::fprintf(stderr, "\n> ");
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history.erase(history.begin() + static_cast<std::ptrdiff_t>(keep), history.end());
      std::fprintf(stderr, "(history cleared)\n");
      continue;
    }
    if (line.empty()) continue;
    history.push_back({{"role", "user"}, {"content", line}});
    // Drop the oldest exchanges until the conversation and a full reply fit the context.
    std::vector<text::TokenId> ids = chat_prompt_ids(*chat, tok, history);
    const auto reply_room = static_cast<int64_t>(o.stop.max_new_tokens);
    while (static_cast<int64_t>(ids.size()) + reply_room > context && history.size() > keep + 1) {
      history.erase(history.begin() + static_cast<std::ptrdiff_t>(keep));
      ids = chat_prompt_ids(*chat, tok, history);
    }
    if (static_cast<int64_t>(ids.size()) >= context) {
      std::fprintf(stderr, "error: this message alone (%zu tokens) fills the context of %lld tokens; say less\n",
                   ids.size(), static_cast<long long>(context));
      history.erase(history.end() - 1);
      continue;
    }
    if (f.verbose_prompt)
      std::fprintf(stderr, "[prompt: %zu tokens, %zu messages]\n", ids.size(), static_cast<std::size_t>(history.size()));
    text::GenerateResult r = text::generate(*lm.model, &tok, ids, o, [&](std::string_view piece, text::TokenId) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::printf("\n");
    std::fflush(stdout);
    history.push_back({{"role", "assistant"}, {"content", r.text}});
  }
}

}  // namespace

void add_chat_command(CLI::App& app) {
  auto f = std::make_shared<ChatFlags>();
  f->gen.n_tokens = 512;
  auto* cmd = app.add_subcommand("chat", "talk with a chat model in the terminal (its chat template, streamed replies, "
                                         "multi-turn history)");
  f->gen.model.add_to(*cmd);
  cmd->add_option("--system", f->system, "a system message that opens the conversation");
  cmd->add_option("--chat-template", f->chat_template, "a Jinja chat template file instead of the model's");
  cmd->add_option("-n,--n-predict,--max-new-tokens", f->gen.n_tokens, "most tokens per reply (default 512)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--temp,--temperature", f->gen.temp, "sampling temperature; 0 = greedy (default)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", f->gen.top_k, "keep the k most likely tokens (default 50; 0 = off)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", f->gen.top_p, "nucleus sampling mass (default 1 = off)")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--repeat-penalty,--repetition-penalty", f->gen.repeat_penalty, "repetition penalty (default 1)");
  cmd->add_option("-s,--seed", f->gen.seed, "random seed for sampling (default 0)");
  cmd->add_flag("--verbose-prompt", f->verbose_prompt, "print each turn's prompt size (tokens, messages) to stderr");
  cmd->callback([f] { run_chat(*f); });
}

}  // namespace ferry::cli
