// ferry's Unigram model and Precompiled normalizer against the oracle, Hugging Face `tokenizers` itself.
//
// tests/reference/unigram_oracle.py trains SentencePiece Unigram models and converts them with transformers
// into T5-family tokenizer.json files (T5 with the nmt_nfkc charsmap, a byte-fallback model through the generic
// SentencePiece conversion, an identity-normalized one, edited variants with Metaspace "never" + Strip and
// without unk_id), then records what `tokenizers` returns for ~400 varied strings. This test loads the same
// files and requires 100% agreement on encode ids (with and without special tokens; an HF encode error must be
// a ferry::Error), decode strings (with and without skipping special tokens), and DecodeStream adding up to
// decode. It skips, saying why, when no Python with tokenizers, transformers, sentencepiece and protobuf is
// available (see python_oracle.h and tests/reference/requirements.txt).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/text/tokenizer.h"
#include "python_oracle.h"

namespace ferry::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::string show(const std::string& s) {
  std::string out = "\"";
  for (std::size_t i = 0; i < s.size() && i < 160; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  return out + (s.size() > 160 ? "\"..." : "\"");
}

std::string show(const std::vector<TokenId>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size() && i < 40; ++i) {
    if (i) out.push_back(',');
    out.append(std::to_string(ids[i]));  // append, not +: GCC 12 -O3 warns falsely (-Wrestrict) on + chains
  }
  out.append(ids.size() > 40 ? ",...]" : "]");
  return out;
}

class UnigramOracle : public testing::OracleSuite<UnigramOracle, json> {
 public:
  static constexpr const char* kScript = "unigram_oracle.py";
};

TEST_F(UnigramOracle, EncodeAndDecodeMatchTokenizers) {
  ScopedLogCapture quiet(LogLevel::Error);
  const json& inputs = oracle()["inputs"];
  std::size_t total = 0, failed = 0;
  for (const json& t : oracle()["tokenizers"]) {
    const std::string name = t["name"];
    const Tokenizer tok = Tokenizer::from_file(dir() / t["file"].get<std::string>());
    EXPECT_EQ(tok.vocab_size(), t["vocab_size"].get<std::size_t>()) << name;
    std::size_t agree = 0, strings = 0;
    std::vector<std::string> first;
    auto fail = [&](std::string what) {
      if (first.size() < 5) first.push_back(std::move(what));
    };
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const std::string text = from_hex(inputs[i].get<std::string>());
      const json& want = t["cases"][i];
      ++strings;
      if (want.contains("error")) {
        try {
          const auto got = tok.encode(text);
          fail("encode(" + show(text) + "): HF fails (" + want["error"].get<std::string>() + "), ferry gives " + show(got));
        } catch (const Error&) {
          ++agree;
        }
        continue;
      }
      bool ok = true;
      for (const bool special : {true, false}) {
        const auto want_ids = want[special ? "ids" : "ids_plain"].get<std::vector<TokenId>>();
        std::vector<TokenId> got;
        try {
          got = tok.encode(text, special);
        } catch (const Error& e) {
          fail("encode(" + show(text) + "): ferry throws " + e.what());
          ok = false;
          continue;
        }
        if (got != want_ids) {
          fail("encode(" + show(text) + (special ? "" : ", add_special_tokens=false") + ")\n  want " + show(want_ids) +
               "\n  got  " + show(got));
          ok = false;
        }
      }
      const auto ids = want["ids"].get<std::vector<TokenId>>();
      for (const bool skip : {false, true}) {
        const std::string want_text = want[skip ? "decoded_skip" : "decoded"];
        const std::string got = tok.decode(ids, skip);
        if (got != want_text) {
          fail("decode(" + show(ids) + (skip ? ", skip_special_tokens" : "") + ")\n  want " + show(want_text) +
               "\n  got  " + show(got));
          ok = false;
        }
      }
      DecodeStream stream(tok);
      std::string streamed;
      for (const TokenId id : ids) streamed += stream.step(id).value_or("");
      streamed += stream.finish();
      if (streamed != want["decoded"].get<std::string>()) {
        fail("DecodeStream over " + show(ids) + "\n  decode   " + show(want["decoded"].get<std::string>()) +
             "\n  streamed " + show(streamed));
        ok = false;
      }
      agree += ok ? 1 : 0;
    }
    total += strings;
    failed += strings - agree;
    std::cout << "[ oracle   ] unigram " << name << ": " << agree << "/" << strings << " strings agree\n";
    for (const std::string& f : first) ADD_FAILURE() << name << ": " << f;
  }
  std::cout << "[ oracle   ] unigram total: " << total - failed << "/" << total << " agree (tokenizers "
            << oracle()["tokenizers_version"].get<std::string>() << ")\n";
  EXPECT_EQ(failed, 0u);
  EXPECT_GE(inputs.size(), 300u);
}

}  // namespace
}  // namespace ferry::text
