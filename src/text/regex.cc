// Regex (see regex.h): Oniguruma-to-PCRE2 translation and onig-crate match iteration.
#include "text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "ferry/core/error.h"
#include "text/unicode.h"

namespace ferry::text::detail {
namespace {

// Oniguruma's \w: Alphabetic, Mark, Nd and Pc above U+00FF, while below it a Latin-1 ctype table
// applies that also counts the digits-like ² ³ ¹ ¼ ½ ¾ (oniguruma src/unicode.c,
// make_unicode_property_data.py). PCRE2's UCP \w is letters, numbers and underscore, so spell it out.
constexpr std::string_view kWordInner = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
// Oniguruma's \h is a hexadecimal digit, PCRE2's is horizontal space.
constexpr std::string_view kHexInner = "0-9a-fA-F";

// Concatenation through append: GCC 12 warns falsely (-Wrestrict) about chains of operator+ here.
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts) out.append(p);
  return out;
}

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

[[noreturn]] void untranslatable(std::string_view what, std::string_view pattern, std::string_view where) {
  throw Error("regex \"" + std::string(pattern) + "\" uses " + std::string(what) +
                  ", an Oniguruma construct ferry cannot run",
              std::string(where), "use a pattern without it");
}

// Per-thread PCRE2 match state: the JIT stack and match data are independent of the pattern, so one
// of each per thread serves every Regex without allocating per call.
struct ThreadMatchState {
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  pcre2_match_data* data = nullptr;
  ThreadMatchState() {
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
    data = pcre2_match_data_create(1, nullptr);  // only the whole match is needed
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(data);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_context_free(context);
  }
  ThreadMatchState(const ThreadMatchState&) = delete;
  ThreadMatchState& operator=(const ThreadMatchState&) = delete;
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

std::string onig_to_pcre2(std::string_view p, std::string_view where) {
  std::string out;
  out.reserve(p.size() + 32);
  // Character-class nesting: 0 outside, 1 in a class, 2+ in a class nested in one (Oniguruma's union: [a[bc]] is
  // [abc]). PCRE2 has no nesting, so a nested class's items are spliced into the outer one; a negated nested class
  // or an intersection, which no union can express, are refused.
  int class_depth = 0;
  for (std::size_t i = 0; i < p.size();) {
    const bool in_class = class_depth > 0;
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char d = p[i + 1];
      i += 2;
      switch (d) {
        case 's': out += "\\p{White_Space}"; break;
        case 'S': out += "\\P{White_Space}"; break;
        case 'w':
          if (in_class) out += kWordInner;
          else out += cat({"[", kWordInner, "]"});
          break;
        case 'W':
          if (in_class) untranslatable("\\W inside a character class", p, where);
          out += cat({"[^", kWordInner, "]"});
          break;
        case 'b':  // word boundary, by Oniguruma's \w (inside a class \b is a backspace in both)
          if (in_class) out += "\\b";
          else out += cat({"(?:(?<=[", kWordInner, "])(?![", kWordInner, "])|(?<![", kWordInner, "])(?=[", kWordInner, "]))"});
          break;
        case 'B':
          if (in_class) untranslatable("\\B inside a character class", p, where);
          out += cat({"(?:(?<=[", kWordInner, "])(?=[", kWordInner, "])|(?<![", kWordInner, "])(?![", kWordInner, "]))"});
          break;
        case 'h':
          if (in_class) out += kHexInner;
          else out += cat({"[", kHexInner, "]"});
          break;
        case 'H':
          if (in_class) untranslatable("\\H inside a character class", p, where);
          out += cat({"[^", kHexInner, "]"});
          break;
        case 'u':
          if (i + 4 <= p.size() && is_hex(p[i]) && is_hex(p[i + 1]) && is_hex(p[i + 2]) && is_hex(p[i + 3])) {
            out += cat({"\\x{", p.substr(i, 4), "}"});
            i += 4;
          } else {
            out += "\\u";
          }
          break;
        default:
          out.push_back('\\');
          out.push_back(d);
      }
      continue;
    }
    if (in_class) {
      if (c == ']') {
        if (--class_depth > 0) {  // the end of a nested class: its items stay in the outer one
          ++i;
          continue;
        }
      } else if (c == '&' && i + 1 < p.size() && p[i + 1] == '&') {
        untranslatable("class intersection (&&)", p, where);
      } else if (c == '[') {
        if (i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class such as [:alpha:], same in both
          const std::size_t close = p.find(":]", i + 2);
          if (close == std::string_view::npos) untranslatable("an unterminated POSIX class", p, where);
          out += p.substr(i, close + 2 - i);
          i = close + 2;
          continue;
        }
        if (i + 1 < p.size() && p[i + 1] == '^') untranslatable("a negated nested character class", p, where);
        ++class_depth;  // BLOOM's " ?[^(\\s|[.,!?…。，、।۔،])]+": the nested items join the outer class
        ++i;
        if (i < p.size() && p[i] == ']') out.push_back(p[i++]);  // a leading ']' is literal here too
        continue;
      }
      out.push_back(c);
      ++i;
      continue;
    }
    if (c == '[') {
      class_depth = 1;
      out.push_back(c);
      ++i;
      if (i < p.size() && p[i] == '^') out.push_back(p[i++]);
      if (i < p.size() && p[i] == ']') out.push_back(p[i++]);  // a leading ']' is literal
      continue;
    }
    if (c == '(' && i + 2 < p.size() && p[i + 1] == '?') {
      // Inline options: Ruby's (?m) is PCRE2's (?s) (dot matches newline); Ruby anchors are always
      // multi-line, which the compile options already select.
      std::size_t j = i + 2;
      while (j < p.size() && (p[j] == 'i' || p[j] == 'm' || p[j] == 'x' || p[j] == '-')) ++j;
      if (j > i + 2 && j < p.size() && (p[j] == ':' || p[j] == ')')) {
        out += "(?";
        for (std::size_t k = i + 2; k < j; ++k) out.push_back(p[k] == 'm' ? 's' : p[k]);
        i = j;
        continue;
      }
    }
    out.push_back(c);
    ++i;
  }
  return out;
}

std::string escape_literal(std::string_view text) {
  std::string out;
  out.reserve(text.size() * 2);
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    const bool plain = u >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!plain) out.push_back('\\');
    if (u < 0x20 || u == 0x7F) {  // control characters: escape numerically, '\' + raw byte means other things
      out.pop_back();
      static const char* kHex = "0123456789ABCDEF";
      out += "\\x{";
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
      out.push_back('}');
      continue;
    }
    out.push_back(c);
  }
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  ~Code() { pcre2_code_free(code); }
};

Regex::Regex(std::string_view onig_pattern, std::string_view where)
    : Regex(onig_pattern, onig_to_pcre2(onig_pattern, where), where) {}

Regex Regex::pcre2(std::string_view pattern, std::string_view where) { return Regex(pattern, std::string(pattern), where); }

Regex::Regex(std::string_view onig_pattern, const std::string& translated, std::string_view where)
    : pattern_(onig_pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  auto code = std::make_shared<Code>();
  code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                             PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, nullptr);
  if (!code->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error("invalid regex \"" + std::string(onig_pattern) + "\": " + reinterpret_cast<const char*>(message) +
                    " at offset " + std::to_string(offset),
                std::string(where), "fix the pattern");
  }
  pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);  // best effort: without JIT the interpreter runs
  code_ = std::move(code);
}

void Regex::find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const {
  ThreadMatchState& st = thread_state();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  std::size_t last_end = 0;
  bool skip_next_empty = false;
  while (last_end <= text.size()) {
    const int rc = pcre2_match(code_->code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK, st.data, st.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      throw Error("regex \"" + pattern_ + "\" failed while matching: " + reinterpret_cast<const char*>(message),
                  "tokenizer", "the input may be pathological for this pattern");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
    const std::size_t s = ov[0], e = ov[1];
    last_end = e;
    // The onig crate's rule: an empty match advances one character, and an empty match right after a
    // non-empty one is dropped.
    if (e == s) {
      last_end += e < text.size() ? utf8_length(static_cast<unsigned char>(text[e])) : 1;
      if (skip_next_empty) {
        skip_next_empty = false;
        continue;
      }
    } else {
      skip_next_empty = true;
    }
    out.emplace_back(s, e);
  }
}

bool Regex::search(std::string_view text) const {
  ThreadMatchState& st = thread_state();
  const int rc = pcre2_match(code_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
                             PCRE2_NO_UTF_CHECK, st.data, st.context);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) throw Error("regex \"" + pattern_ + "\" failed while matching", "tokenizer");
  return true;
}

}  // namespace ferry::text::detail
