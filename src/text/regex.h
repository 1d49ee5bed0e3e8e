// Regex: the Oniguruma-compatible regular expressions of tokenizer.json, run by PCRE2 (UTF + UCP, JIT).
//
// Hugging Face tokenizers compiles the patterns of Split, Replace and the ByteLevel pre-tokenizer with
// Oniguruma (Ruby syntax) and iterates matches with the `onig` crate. This class translates the few
// constructs whose meaning differs in PCRE2 (\s \S \w \W \h \H \uHHHH, and Ruby's line anchors) and
// reproduces the crate's iteration rule for empty matches, so the same pattern splits text the same way.
// Patterns that use Oniguruma-only syntax PCRE2 cannot express (class intersection `&&`) are rejected.
//
// A Regex is immutable after construction and safe to use from several threads at once.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::text::detail {

/// Rewrites an Oniguruma (Ruby syntax) pattern into an equivalent PCRE2 pattern; throws ferry::Error
/// naming `where` for constructs it cannot translate.
std::string onig_to_pcre2(std::string_view pattern, std::string_view where);

/// A PCRE2 pattern that matches `text` literally.
std::string escape_literal(std::string_view text);

class Regex {
 public:
  /// Compiles an Oniguruma pattern. `where` names the JSON field for error messages.
  Regex(std::string_view onig_pattern, std::string_view where);
  /// Compiles a PCRE2 pattern as is (for HF's uses of Rust's `regex` crate, whose classes PCRE2 can spell).
  static Regex pcre2(std::string_view pattern, std::string_view where);

  /// Byte ranges [begin, end) of the successive non-overlapping matches in `text` (valid UTF-8), in the
  /// order and with the empty-match rule of the onig crate's find_iter. Appends to `out`.
  void find_all(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const;

  /// True when the pattern matches somewhere in `text`.
  bool search(std::string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  Regex(std::string_view shown, const std::string& pcre2_pattern, std::string_view where);
  struct Code;
  std::string pattern_;
  std::shared_ptr<const Code> code_;
};

}  // namespace ferry::text::detail
