// Logging sink, level and capture (see include/ferry/core/logging.h).
#include "ferry/core/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace ferry {
namespace {

LogLevel level_from_env() {
  const char* env = std::getenv("FERRY_LOG_LEVEL");
  if (!env) return LogLevel::Warning;
  std::string s(env);
  if (s == "debug") return LogLevel::Debug;
  if (s == "info") return LogLevel::Info;
  if (s == "error") return LogLevel::Error;
  if (s == "off") return LogLevel::Off;
  return LogLevel::Warning;
}

std::atomic<LogLevel>& level() {
  static std::atomic<LogLevel> l{level_from_env()};
  return l;
}

struct SinkState {
  std::mutex mu;
  LogSink sink;
  std::set<std::string> seen;
};

SinkState& state() {
  static SinkState* s = new SinkState;
  return *s;
}

std::string_view prefix(LogLevel l) {
  switch (l) {
    case LogLevel::Debug: return "ferry [debug] ";
    case LogLevel::Info: return "ferry [info] ";
    case LogLevel::Warning: return "ferry [warning] ";
    default: return "ferry [error] ";
  }
}

}  // namespace

void set_log_level(LogLevel l) { level().store(l); }
LogLevel log_level() { return level().load(); }

LogSink set_log_sink(LogSink sink) {
  auto& s = state();
  std::lock_guard lock(s.mu);
  std::swap(s.sink, sink);
  return sink;
}

void log_message(LogLevel l, std::string_view message) {
  if (l < log_level() || l == LogLevel::Off) return;
  auto& s = state();
  std::lock_guard lock(s.mu);
  if (s.sink) {
    s.sink(l, message);
  } else {
    std::string line(prefix(l));
    line.append(message);
    line.push_back('\n');
    std::fwrite(line.data(), 1, line.size(), stderr);
  }
}

void log_once(LogLevel l, const std::string& message) {
  {
    auto& s = state();
    std::lock_guard lock(s.mu);
    if (!s.seen.insert(message).second) return;
  }
  log_message(l, message);
}

ScopedLogCapture::ScopedLogCapture(LogLevel min) : previous_level_(log_level()) {
  previous_ = set_log_sink([this](LogLevel, std::string_view m) {
    std::lock_guard lock(mu_);
    messages_.emplace_back(m);
  });
  set_log_level(min);
}

ScopedLogCapture::~ScopedLogCapture() {
  set_log_sink(std::move(previous_));
  set_log_level(previous_level_);
}

std::vector<std::string> ScopedLogCapture::messages() const {
  std::lock_guard lock(mu_);
  return messages_;
}

bool ScopedLogCapture::contains(std::string_view needle) const {
  std::lock_guard lock(mu_);
  for (const auto& m : messages_)
    if (m.find(needle) != std::string::npos) return true;
  return false;
}

}  // namespace ferry
