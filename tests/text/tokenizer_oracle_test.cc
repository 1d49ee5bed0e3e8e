// ferry's Tokenizer against the oracle, Hugging Face `tokenizers` itself.
//
// tests/reference/tokenizer_oracle.py trains fourteen tokenizers (byte-level GPT-2 / Llama-3 / Qwen2 / BLOOM /
// GPT-NeoX style, SentencePiece-style Llama-2 and Gemma with byte fallback, added-token variants, every Split
// behaviour, ...) and records what `tokenizers` returns for >= 2,000 strings. This test loads the same tokenizer.json
// files and requires 100% agreement on encode ids (with and without special tokens), decode strings (with and without
// skipping special tokens) and DecodeStream (its text adds up to decode; its chunks are HF's where HF's stream does not
// raise and no byte-fallback piece is involved), printing the first mismatches. It skips, saying why, when no Python
// with `tokenizers` is available (see python_oracle.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/text/tokenizer.h"
#include "python_oracle.h"

namespace ferry::text {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Concatenation by append (GCC 12 -O3 warns falsely, -Wrestrict, about chains of std::string operator+).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(parts), ...);
  return out;
}

std::string from_hex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

// Printable form of a string for failure messages (escapes control and non-ASCII bytes).
std::string show(const std::string& s, std::size_t limit = 160) {
  std::string out;
  for (std::size_t i = 0; i < s.size() && i < limit; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02X", c);
      out += buf;
    }
  }
  if (s.size() > limit) out.append("...(").append(std::to_string(s.size())).append(" bytes)");
  return std::string("\"").append(out).append("\"");
}

std::string show(const std::vector<TokenId>& ids) {
  std::string out = "[";
  for (std::size_t i = 0; i < ids.size() && i < 40; ++i) {
    if (i) out += ",";
    out += std::to_string(ids[i]);
  }
  if (ids.size() > 40) out += cat(",...(", std::to_string(ids.size()), " ids)");
  out += "]";
  return out;
}

// The oracle's DecodeStream chunks: text, nothing (nullopt) or an error (then the stream stops).
struct StreamChunk {
  bool error = false;
  std::optional<std::string> text;
  bool operator==(const StreamChunk& o) const { return error == o.error && text == o.text; }
};

std::vector<StreamChunk> expected_stream(const json& j) {
  std::vector<StreamChunk> out;
  for (const json& c : j) {
    StreamChunk s;
    if (c.is_object()) s.error = true;
    else if (c.is_string()) s.text = c.get<std::string>();
    out.push_back(s);
  }
  return out;
}

struct FerryStream {
  std::vector<StreamChunk> chunks;
  std::string text;  // the chunks and finish(), concatenated
};

FerryStream ferry_stream(const Tokenizer& tok, const std::vector<TokenId>& ids, bool skip) {
  DecodeStream stream(tok, skip);
  FerryStream out;
  for (TokenId id : ids) {
    StreamChunk s;
    try {
      s.text = stream.step(id);
      if (s.text) out.text += *s.text;
    } catch (const Error&) {
      s.error = true;
    }
    out.chunks.push_back(s);
    if (s.error) return out;
  }
  out.text += stream.finish();
  return out;
}

bool has_byte_piece(const Tokenizer& tok, const std::vector<TokenId>& ids) {
  for (TokenId id : ids) {
    const auto piece = tok.id_to_token(id);
    if (piece && piece->size() == 6 && piece->compare(0, 3, "<0x") == 0) return true;
  }
  return false;
}

std::string show(const std::vector<StreamChunk>& chunks) {
  std::string out = "[";
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    out += i ? ", " : "";
    out += chunks[i].error ? "ERROR" : chunks[i].text ? show(*chunks[i].text, 40) : "None";
  }
  out += "]";
  return out;
}

// Counts checks and keeps the first few mismatches of one tokenizer.
struct Tally {
  std::size_t checks = 0, failures = 0;
  std::vector<std::string> first;
  void check(bool ok, const std::function<std::string()>& describe) {
    ++checks;
    if (ok) return;
    ++failures;
    if (first.size() < 5) first.push_back(describe());
  }
};

class TokenizerOracle : public testing::OracleSuite<TokenizerOracle, json> {
 public:
  static constexpr const char* kScript = "tokenizer_oracle.py";

 protected:
  // Runs `check(tokenizer, entry, tally)` for every oracle tokenizer, prints a summary line per tokenizer
  // and fails with the first mismatches if any tokenizer disagrees anywhere.
  template <class Fn>
  void for_each_tokenizer(const char* what, Fn check) {
    ScopedLogCapture quiet(LogLevel::Error);  // added-token id notices are expected in some fixtures
    std::size_t total = 0, failed = 0;
    for (const json& t : oracle()["tokenizers"]) {
      const std::string name = t["name"];
      const Tokenizer tok = Tokenizer::from_file(dir() / t["file"].get<std::string>());
      Tally tally;
      check(tok, t, tally);
      total += tally.checks;
      failed += tally.failures;
      std::cout << "[ oracle   ] " << what << " " << name << ": " << tally.checks - tally.failures << "/"
                << tally.checks << " agree\n";
      for (const std::string& f : tally.first) ADD_FAILURE() << name << ": " << f;
    }
    std::cout << "[ oracle   ] " << what << " total: " << total - failed << "/" << total << " agree (tokenizers "
              << oracle()["tokenizers_version"].get<std::string>() << ", "
              << oracle()["inputs"].size() << " strings)\n";
    EXPECT_EQ(failed, 0u);
    EXPECT_GE(oracle()["inputs"].size(), 2000u);
  }

  static std::string input(std::size_t i) { return from_hex(oracle()["inputs"][i].get<std::string>()); }

};

TEST_F(TokenizerOracle, EncodeIdsMatch) {
  for_each_tokenizer("encode", [](const Tokenizer& tok, const json& t, Tally& tally) {
    const json& cases = t["cases"];
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const std::string text = input(i);
      const auto want = cases[i]["ids"].get<std::vector<TokenId>>();
      const auto got = tok.encode(text, true);
      tally.check(got == want, [&] { return cat(std::string("encode("), show(text), std::string(")\n  want "), show(want), std::string("\n  got  "), show(got)); });
      if (cases[i].contains("ids_plain")) {
        const auto want_plain = cases[i]["ids_plain"].get<std::vector<TokenId>>();
        const auto got_plain = tok.encode(text, false);
        tally.check(got_plain == want_plain, [&] {
          return cat(std::string("encode("), show(text), std::string(", add_special_tokens=false)\n  want "), show(want_plain),
                     std::string("\n  got  "), show(got_plain));
        });
      }
    }
  });
}

TEST_F(TokenizerOracle, DecodeStringsMatch) {
  for_each_tokenizer("decode", [](const Tokenizer& tok, const json& t, Tally& tally) {
    auto check = [&](const json& c) {
      const auto ids = c["ids"].get<std::vector<TokenId>>();
      for (const bool skip : {false, true}) {
        const std::string want = c[skip ? "decoded_skip" : "decoded"];
        const std::string got = tok.decode(ids, skip);
        tally.check(got == want, [&] {
          return cat(std::string("decode("), show(ids), std::string(skip ? ", skip_special_tokens" : ""),
                     std::string(")\n  want "), show(want), std::string("\n  got  "), show(got));
        });
      }
    };
    for (const json& c : t["cases"]) check(c);
    for (const json& c : t["random_decodes"]) check(c);
  });
}

// ferry's stream never fails and always adds up to HF's decode; where HF's DecodeStream raises nothing and no
// byte-fallback piece is involved (ferry holds those runs until they end), the chunks are HF's own.
TEST_F(TokenizerOracle, DecodeStreamAddsUpToDecodeAndMatchesHfChunks) {
  for_each_tokenizer("stream", [](const Tokenizer& tok, const json& t, Tally& tally) {
    auto check = [&](const json& c, const char* key, bool skip) {
      if (!c.contains(key)) return;
      const auto ids = c["ids"].get<std::vector<TokenId>>();
      const auto hf = expected_stream(c[key]);
      const FerryStream got = ferry_stream(tok, ids, skip);
      const std::string decoded = c[skip ? "decoded_skip" : "decoded"];
      tally.check(got.chunks.size() == ids.size() && got.text == decoded, [&] {
        return cat(std::string("DecodeStream"), std::string(skip ? "(skip_special_tokens)" : ""), std::string(" over "),
                   show(ids), std::string("\n  decode   "), show(decoded), std::string("\n  streamed "), show(got.text),
                   std::string("\n  chunks "), show(got.chunks));
      });
      const bool hf_failed = std::any_of(hf.begin(), hf.end(), [](const StreamChunk& s) { return s.error; });
      if (hf_failed || has_byte_piece(tok, ids)) return;
      tally.check(got.chunks == hf, [&] {
        return cat(std::string("DecodeStream chunks"), std::string(skip ? "(skip_special_tokens)" : ""),
                   std::string(" over "), show(ids), std::string("\n  want "), show(hf), std::string("\n  got  "),
                   show(got.chunks));
      });
    };
    for (const json& c : t["cases"]) check(c, "stream", false);
    for (const json& c : t["random_decodes"]) {
      check(c, "stream", false);
      check(c, "stream_skip", true);
    }
  });
}

}  // namespace
}  // namespace ferry::text
