// ferry tokenize -m FOLDER TEXT — token ids of a text (--decode: the text of ids), like llama-tokenize.
#include <memory>

#include "cli.h"
#include "commands.h"
#include "ferry/core/error.h"
#include "ferry/models/gguf_model.h"
#include "ferry/text/tokenizer.h"
#include "ferry/text/pretrained.h"

namespace ferry::cli {

void add_tokenize_command(CLI::App& app) {
  struct Opts {
    std::string model, text;
    bool decode = false, no_special = false, pieces = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("tokenize", "print the token ids of a text (or, with --decode, the text of ids)");
  cmd->add_option("-m,--model", o->model, "model folder holding tokenizer.json")->required();
  cmd->add_option("text", o->text, "the text (with --decode: comma-separated ids)")->required();
  cmd->add_flag("--decode", o->decode, "decode ids to text");
  cmd->add_flag("--no-special", o->no_special, "do not add BOS/EOS (encode) / skip special tokens (decode)");
  cmd->add_flag("--pieces", o->pieces, "print each id with its token string");
  cmd->callback([o] {
    text::Tokenizer tok = text::load_tokenizer(o->model);
    if (o->decode) {
      std::vector<text::TokenId> ids;
      for (int64_t v : parse_int_list(o->text, "text")) ids.push_back(static_cast<text::TokenId>(v));
      std::printf("%s\n", tok.decode(ids, o->no_special).c_str());
      return;
    }
    auto ids = tok.encode(o->text, !o->no_special);
    if (o->pieces) {
      for (auto id : ids) std::printf("%6d -> '%s'\n", id, tok.id_to_token(id).value_or("?").c_str());
      return;
    }
    std::string line;
    for (std::size_t i = 0; i < ids.size(); ++i) line += (i ? "," : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  });
}

}  // namespace ferry::cli
