// SentencePiece ("llama") GGUF vocabularies against llama.cpp itself: a SentencePiece BPE model trained with Llama's
// settings, put into a GGUF by llama.cpp's converter, tokenized by llama.cpp (tests/reference/spm_gguf_oracle.py;
// skipped without the reference venv). ferry's tokenizer from the file's metadata must give llama.cpp's ids for
// every text — byte fallback, split digits, spaces, newlines, special tokens in the text, empty input — with and
// without BOS, and decode them as SentencePiece does.
#include <gtest/gtest.h>

#include <fstream>

#include "ferry/io/gguf.h"
#include "ferry/models/gguf_model.h"
#include "ferry/text/tokenizer.h"
#include "support/hf_folder.h"

namespace ferry::models {
namespace {

namespace fs = std::filesystem;

TEST(GgufSentencePiece, TokenizesAsLlamaCpp) {
  auto python = test::reference_python(FERRY_SOURCE_DIR);
  const fs::path converter = fs::path(FERRY_SOURCE_DIR) / ".venv" / "src" / "llama.cpp";
  if (!python || !fs::exists(converter / "convert_hf_to_gguf.py"))
    GTEST_SKIP() << "no reference venv with llama.cpp and sentencepiece (scripts/venv)";
  test::TempDir dir;
  ASSERT_EQ(test::run_reference_script(*python, "spm_gguf_oracle.py", {converter.string(), dir.path().string()},
                                       dir.path() / "oracle.log"),
            "");
  std::ifstream in(dir.path() / "spm.json");
  const nlohmann::json want = nlohmann::json::parse(in);
  const io::GgufFile file = io::GgufFile::open(want["gguf"].get<std::string>());
  ASSERT_EQ(file.require_string("tokenizer.ggml.model"), "llama");
  const text::Tokenizer tok = text::Tokenizer::from_json(gguf_tokenizer_json(file).dump());
  for (const auto& t : want["texts"]) {
    const std::string s = t["text"].get<std::string>();
    const auto ids = t["ids"].get<std::vector<text::TokenId>>();
    EXPECT_EQ(tok.encode(s, false), ids) << "'" << s << "'";
    EXPECT_EQ(tok.encode(s, true), t["ids_bos"].get<std::vector<text::TokenId>>()) << "'" << s << "' with BOS";
    EXPECT_EQ(tok.decode(ids, /*skip_special_tokens=*/true), t["decoded"].get<std::string>()) << "'" << s << "'";
  }
}

}  // namespace
}  // namespace ferry::models
