// libFuzzer target for the tokenizer: tokenizer.json parsing, and encode/decode of arbitrary bytes.
//
// The first input byte picks the mode. Even: the rest is a tokenizer.json document; loading must either
// succeed or throw ferry::Error (any other exception or a crash is a bug); a loaded tokenizer then
// encodes and decodes a few fixed strings. Odd: the rest is text (any bytes, invalid UTF-8 included)
// for a fixed byte-level tokenizer with added tokens, a Llama-2-style byte-fallback tokenizer and a
// T5-family Unigram tokenizer with a Precompiled normalizer; encode must not crash, decode must return
// valid UTF-8, and DecodeStream must agree with decode.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ferry/core/error.h"
#include "ferry/text/tokenizer.h"

namespace {

using ferry::text::DecodeStream;
using ferry::text::Tokenizer;
using ferry::text::TokenId;

// Byte-level BPE over a few merges, an added token and a template; written out so the target needs no files.
const char* kByteLevel = R"({
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [{"id": 12, "content": "<s>", "single_word": false, "lstrip": true, "rstrip": false,
                    "normalized": false, "special": true}],
  "normalizer": {"type": "NFC"},
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "TemplateProcessing", "single": ["<s>", "$A"], "pair": ["$A", "$B"],
                     "special_tokens": {"<s>": {"id": "<s>", "ids": [12], "tokens": ["<s>"]}}},
  "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": {"a": 0, "b": 1, "c": 2, "\u0120": 3, "\u0120a": 4, "ab": 5, "abc": 6, "\u00c3": 7, "\u00a9": 8,
                      "\u00c3\u00a9": 9, "d": 10, "e": 11},
            "merges": ["\u0120 a", "a b", "ab c", "\u00c3 \u00a9"]}
})";

// SentencePiece-style BPE with byte fallback for a handful of bytes and the Llama-2 normalizer/decoder.
const char* kByteFallback = R"({
  "version": "1.0",
  "added_tokens": [{"id": 0, "content": "<unk>", "special": true, "normalized": false}],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                 {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
  "pre_tokenizer": null,
  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
              {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
            "vocab": {"<unk>": 0, "<0xC3>": 1, "<0xA9>": 2, "<0xE2>": 3, "<0x82>": 4, "<0xAC>": 5, "\u2581": 6,
                      "a": 7, "b": 8, "\u2581a": 9, "ab": 10},
            "merges": ["\u2581 a", "a b"]}
})";

// T5-family Unigram with byte fallback, as transformers converts a SentencePiece model (legacy=False): a
// Precompiled charsmap (rules A->a, ™->TM, U+200B->"", e+U+0301->é, Ａ->A) and Replace normalizers, Metaspace
// "first", and the SentencePiece decoder chain.
const std::string kUnigram = std::string(R"({
  "version": "1.0",
  "added_tokens": [{"id": 0, "content": "<unk>", "single_word": false, "lstrip": false, "rstrip": false,
                    "normalized": false, "special": true},
                   {"id": 1, "content": "</s>", "single_word": false, "lstrip": false, "rstrip": false,
                    "normalized": false, "special": true}],
  "normalizer": {"type": "Sequence", "normalizers": [
                 {"type": "Precompiled", "precompiled_charsmap": ")") +
    "AAQAAAAAAQBBDQAABgAAgMwYAgCBBQAACAAAgIsFAAAAAACAgBQCAKINAAADAACAvJwCAIScAgChDQAAAQAAgA4AAAARAAAAEAAA"
    "ABMAAAASAAAAFQAAABQAAAAXAAAAFgAAABkAAAAYAAAAGwAAABoAAAAdAAAAHAAAAB8AAAAeAAAAIQAAACAAAAAjAAAAIgAAACUA"
    "AABlqAMAJwAAACYAAAApAAAAKAAAACsAAAAqAAAALQAAACwAAAAvAAAALgAAADEAAAAwAAAAMwAAADIAAAA1AAAANAAAADcAAAA2"
    "AAAAOQAAADgAAAA7AAAAOgAAAD0AAAA8AAAAPwAAAD4AAABBAAAAQAAAAEMAAABCAAAARQAAAEQAAABHAAAARgAAAEkAAABIAAAA"
    "SwAAAEoAAABNAAAATAAAAE8AAABOAAAAUQAAAFAAAABTAAAAUgAAAFUAAABUAAAAVwAAAFYAAABZAAAAWAAAAFsAAABaAAAAXQAA"
    "AFwAAABfAAAAXgAAAGEAAABgAAAAYwAAAGIAAABlAAAAZAAAAGcAAABmAAAAaQAAAGgAAABrAAAAagAAAG0AAABsAAAAbwAAAG4A"
    "AABxAAAAcAAAAHMAAAByAAAAdQAAAHQAAAB3AAAAdgAAAHkAAAB4AAAAewAAAHoAAAB9AAAAfAAAAH8AAAB+AAAAgQAAAIAAAACD"
    "AAAAggAAAIUAAACEAAAAhwAAAIYAAACJAAAAiAAAAIsAAACKAAAAjQAAAIwAAACPAAAAjgAAAJEAAACQAAAAkwAAAJIAAACVAAAA"
    "lAAAAJcAAACWAAAAmQAAAJgAAACbAAAAmgAAAJ0AAACcAAAAnwAAAJ4AAAChAAAAoAAAAOKoAACiAAAApQAAAKQAAACnAAAApgAA"
    "AKkAAACoAAAAqwAAAKoAAACtAAAArAAAAK8AAADvYAAAsQAAALAAAACzAAAAsgAAALUAAAC0AAAAtwAAALYAAAC5AAAAuAAAALsA"
    "AAC6AAAAvQAAALwAAAC/AAAAvgAAAMEAAADAAAAAwwAAAMIAAADFAAAAxAAAAMcAAADGAAAAyQAAAMgAAADLAAAAygAAAM0AAADM"
    "AAAAzwAAAM4AAADRAAAA0AAAANMAAADSAAAA1QAAANQAAADXAAAA1gAAANkAAADYAAAA2wAAANoAAADdAAAA3AAAAN8AAADeAAAA"
    "4QAAAOAAAADjAAAA4gAAAOUAAADkAAAA5wAAAOYAAADpAAAA6AAAAOsAAADqAAAA7QAAAOwAAADvAAAA7gAAAPEAAADwAAAA8wAA"
    "APIAAAD1AAAA9AAAAPcAAAD2AAAA+QAAAPgAAAD7AAAA+gAAAP0AAAD8AAAA/wAAAP4AAAAAQQBUTQBhAMOpAA==" +
    R"("},
                 {"type": "Replace", "pattern": {"Regex": "\\A +| +\\z"}, "content": ""},
                 {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
                 {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
  "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": false},
  "post_processor": {"type": "TemplateProcessing",
                     "single": [{"Sequence": {"id": "A", "type_id": 0}},
                                {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                     "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}},
                              {"Sequence": {"id": "B", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
                     "special_tokens": {"</s>": {"id": "</s>", "ids": [1], "tokens": ["</s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
              {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": true,
            "vocab": [["<unk>", 0.0], ["</s>", 0.0], ["<0xC3>", -9.5], ["<0xA9>", -9.5], ["<0xE2>", -9.5],
                      ["<0x82>", -9.5], ["<0xAC>", -9.5], ["\u2581", -2.5], ["a", -3.0], ["b", -3.25],
                      ["\u2581a", -2.75], ["ab", -4.0], ["\u2581ab", -3.5], ["\u00e9", -5.0], ["TM", -6.0]]}
})";

bool valid_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += n;
  }
  return true;
}

// Encodes and decodes `text`. check_stream: also require the streamed text to be a prefix of the full
// decode (asserted only for the fixed tokenizers and text without U+FFFD, where it must hold).
void exercise(const Tokenizer& tok, std::string_view text, bool check_stream) {
  for (const bool special : {true, false}) {
    const std::vector<TokenId> ids = tok.encode(text, special);
    for (const bool skip : {false, true}) {
      const std::string decoded = tok.decode(ids, skip);
      if (!valid_utf8(decoded)) std::abort();
    }
    DecodeStream stream(tok);
    std::string streamed;
    try {
      for (const TokenId id : ids) {
        if (auto piece = stream.step(id)) streamed += *piece;
      }
    } catch (const ferry::Error&) {
      continue;  // some decoders cannot be streamed; HF raises the same error
    }
    const std::string whole = tok.decode(ids, false);
    // Streamed text is a prefix of the full decode (the rest may wait for a character to complete).
    if (check_stream && whole.find("\xEF\xBF\xBD") == std::string::npos && whole.compare(0, streamed.size(), streamed) != 0) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    static const Tokenizer byte_level = Tokenizer::from_json(kByteLevel, "fuzz byte-level");
    static const Tokenizer byte_fallback = Tokenizer::from_json(kByteFallback, "fuzz byte-fallback");
    static const Tokenizer unigram = Tokenizer::from_json(kUnigram, "fuzz unigram");
    exercise(byte_level, rest, true);
    exercise(byte_fallback, rest, true);
    exercise(unigram, rest, true);
    return 0;
  }
  try {
    const Tokenizer tok = Tokenizer::from_json(rest, "fuzz tokenizer.json");
    for (const char* text : {"", "Hello world", "a  b\n\tc", "\xC3\xA9\xE2\x82", "<s>x</s>", "12345"}) exercise(tok, text, false);
  } catch (const ferry::Error&) {
    // malformed input reported properly
  }
  return 0;
}
