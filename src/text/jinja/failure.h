// How the Jinja engine reports a failure before it knows where in the template it happened: builtins (filters,
// tests, methods) throw a Failure; the interpreter turns it into a ferry::Error naming the template and the
// line:column of the expression being evaluated. Limits shared by the lexer, parser and interpreter live here too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdint>
#include <string>

namespace ferry::text::jinja {

/// A template-level failure without a location yet. `raised` marks the template's own raise_exception().
struct Failure {
  std::string problem;
  std::string hint;
  bool raised = false;
};

[[noreturn]] inline void fail(std::string problem, std::string hint = {}) {
  throw Failure{std::move(problem), std::move(hint), false};
}

/// Bounds that keep any input from crashing or hanging the engine.
struct Limits {
  static constexpr std::size_t kMaxNesting = 200;          // parser: nested expressions and blocks
  static constexpr std::size_t kMaxCallDepth = 100;        // interpreter: nested macro calls
  static constexpr std::size_t kMaxOutput = 16u << 20;     // bytes of rendered text and of any one string
  static constexpr std::size_t kMaxListItems = 1u << 20;   // items of any one list built by the template
  static constexpr std::size_t kMaxSteps = 1'000'000;      // loop iterations and macro calls per render
  static constexpr std::int64_t kMaxRange = 100'000;       // jinja2's sandbox MAX_RANGE
  static constexpr std::size_t kStringBudget = 512u << 20;  // bytes of all strings one render creates
  static constexpr std::size_t kListBudget = 8u << 20;      // items of all lists one render creates
};

/// What a render may still allocate in strings (bytes) and lists (items), summed over every value it creates, so
/// no template can exhaust memory by keeping many large values alive. Unlimited outside a render.
inline thread_local std::size_t g_string_budget = SIZE_MAX;
inline thread_local std::size_t g_list_budget = SIZE_MAX;

}  // namespace ferry::text::jinja
