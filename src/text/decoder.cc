// Decoders (see decoder.h). Each reproduces the quirks of its HF counterpart, since decode() output must
// match byte for byte (e.g. Metaspace drops every replacement character of the first token, not one).
#include "text/decoder.h"

#include "text/byte_level.h"
#include "text/normalizer.h"
#include "text/unicode.h"

namespace ferry::text::detail {
namespace {

// ByteLevel: byte-level characters back to bytes, all tokens fused, invalid UTF-8 replaced by U+FFFD.
class ByteLevel final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string bytes;
    for (const std::string& t : tokens) {
      const std::size_t mark = bytes.size();
      std::size_t i = 0;
      bool all = true;
      while (i < t.size()) {
        const int b = byte_level_byte(next_code_point(t, i));
        if (b < 0) {
          all = false;
          break;
        }
        bytes.push_back(static_cast<char>(b));
      }
      if (!all) {  // a token outside the byte alphabet (an added token, say) passes through as is
        bytes.resize(mark);
        bytes += t;
      }
    }
    tokens.assign(1, to_valid_utf8(bytes));
  }
};

class Metaspace final : public Decoder {
 public:
  Metaspace(std::string replacement, bool prepend) : replacement_(std::move(replacement)), prepend_(prepend) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (std::size_t k = 0; k < t.size();) {
        if (t.compare(k, replacement_.size(), replacement_) == 0) {
          if (!(i == 0 && prepend_)) out.push_back(' ');
          k += replacement_.size();
        } else {
          const std::size_t n = utf8_length(static_cast<unsigned char>(t[k]));
          out.append(t, k, n);
          k += n;
        }
      }
      tokens[i] = std::move(out);
    }
  }

 private:
  std::string replacement_;
  bool prepend_;
};

class Replace final : public Decoder {
 public:
  Replace(Regex regex, std::string content) : regex_(std::move(regex)), content_(std::move(content)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) t = replace_all(regex_, t, content_);
  }

 private:
  Regex regex_;
  std::string content_;
};

// ByteFallback: runs of <0xNN> tokens become their bytes when those form valid UTF-8, else one U+FFFD
// per byte token.
class ByteFallback final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string pending;
    auto flush = [&] {
      if (pending.empty()) return;
      if (is_valid_utf8(pending)) out.push_back(pending);
      else for (std::size_t k = 0; k < pending.size(); ++k) out.emplace_back(kReplacementChar);
      pending.clear();
    };
    for (std::string& t : tokens) {
      int byte = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') byte = parse_hex(t[3], t[4]);
      if (byte >= 0) {
        pending.push_back(static_cast<char>(byte));
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens = std::move(out);
  }

 private:
  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }
  static int parse_hex(char a, char b) {
    if (a == '+') return hex(b);  // Rust's u8::from_str_radix accepts a leading '+'
    const int h = hex(a), l = hex(b);
    return h < 0 || l < 0 ? -1 : h * 16 + l;
  }
};

class Fuse final : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::string all;
    for (const auto& t : tokens) all += t;
    tokens.assign(1, std::move(all));
  }
};

// Strip: removes up to `start` leading and `stop` trailing copies of one character from each token.
class Strip final : public Decoder {
 public:
  Strip(std::string content, std::size_t start, std::size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::string& t : tokens) {
      std::vector<std::size_t> starts;  // byte offset of each character
      for (std::size_t i = 0; i < t.size(); i += utf8_length(static_cast<unsigned char>(t[i]))) starts.push_back(i);
      auto is_content = [&](std::size_t c) {
        const std::size_t end = c + 1 < starts.size() ? starts[c + 1] : t.size();
        return t.compare(starts[c], end - starts[c], content_) == 0;
      };
      std::size_t first = 0, last = starts.size();
      for (std::size_t c = 0; c < start_ && c < starts.size() && is_content(c); ++c) first = c + 1;
      for (std::size_t k = 0; k < stop_ && k < starts.size(); ++k) {
        const std::size_t c = starts.size() - k - 1;
        if (!is_content(c)) break;
        last = c;
      }
      if (first >= last) {
        t.clear();
        continue;
      }
      const std::size_t b = starts[first], e = last < starts.size() ? starts[last] : t.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  std::size_t start_, stop_;
};

void replace_substring(std::string& s, std::string_view from, std::string_view to) {
  if (from.empty()) return;
  std::string out;
  std::size_t pos = 0;
  for (std::size_t hit; (hit = s.find(from, pos)) != std::string::npos; pos = hit + from.size()) {
    out.append(s, pos, hit - pos);
    out.append(to);
  }
  out.append(s, pos, std::string::npos);
  s = std::move(out);
}

// BPEDecoder: the end-of-word suffix becomes a space (nothing after the last token).
class BpeDecoder final : public Decoder {
 public:
  explicit BpeDecoder(std::string suffix) : suffix_(std::move(suffix)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) replace_substring(tokens[i], suffix_, i + 1 == tokens.size() ? "" : " ");
  }

 private:
  std::string suffix_;
};

class WordPiece final : public Decoder {
 public:
  WordPiece(std::string prefix, bool cleanup) : prefix_(std::move(prefix)), cleanup_(cleanup) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      std::string& t = tokens[i];
      if (i != 0) {
        if (t.compare(0, prefix_.size(), prefix_) == 0) t.erase(0, prefix_.size());
        else t = std::string(" ").append(t);
      }
      if (cleanup_) {
        static const std::pair<const char*, const char*> kRules[] = {
            {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
            {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
        for (const auto& [from, to] : kRules) replace_substring(t, from, to);
      }
    }
  }

 private:
  std::string prefix_;
  bool cleanup_;
};

class Sequence final : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& s : steps_) s->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

}  // namespace

std::unique_ptr<Decoder> parse_decoder(const JsonView& json) {
  json.expect_object();
  const std::string type = json.at("type").as_string();
  if (type == "ByteLevel") return std::make_unique<ByteLevel>();
  if (type == "Metaspace") {
    bool prepend = true;  // prepend_scheme defaults to "always"
    if (auto v = json.get("prepend_scheme")) {
      const std::string s = v->as_string();
      if (s != "first" && s != "never" && s != "always") v->fail("unknown prepend_scheme \"" + s + "\"");
      prepend = s != "never";
    }
    if (auto v = json.get("add_prefix_space"); v && !v->as_bool()) prepend = false;
    return std::make_unique<Metaspace>(json.at("replacement").as_char(), prepend);
  }
  if (type == "Replace") {
    Regex pattern = parse_pattern(json.at("pattern"));
    return std::make_unique<Replace>(std::move(pattern), json.at("content").as_string());
  }
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "Strip") {
    const std::string content = json.at("content").as_char();
    const std::size_t start = json.at("start").as_u32();
    return std::make_unique<Strip>(content, start, json.at("stop").as_u32());
  }
  if (type == "BPEDecoder") return std::make_unique<BpeDecoder>(json.string_or("suffix", "</w>"));
  if (type == "WordPiece") return std::make_unique<WordPiece>(json.string_or("prefix", "##"), json.bool_or("cleanup", true));
  if (type == "Sequence") {
    const JsonView list = json.at("decoders");
    std::vector<std::unique_ptr<Decoder>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) steps.push_back(parse_decoder(list[i]));
    return std::make_unique<Sequence>(std::move(steps));
  }
  if (type == "CTC") json.at("type").fail("the CTC decoder is not supported by ferry");
  json.at("type").fail("unknown decoder type \"" + type + "\"");
}

}  // namespace ferry::text::detail
