// Logging: library code never prints; it logs through one sink (stderr by default) at a level
// (FERRY_LOG_LEVEL=debug|info|warning|error|off, default warning). Tests capture messages with ScopedLogCapture.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace ferry {

enum class LogLevel { Debug, Info, Warning, Error, Off };

using LogSink = std::function<void(LogLevel, std::string_view)>;

void set_log_level(LogLevel level);
LogLevel log_level();
/// Replaces the sink; returns the previous one. An empty sink restores stderr.
LogSink set_log_sink(LogSink sink);
void log_message(LogLevel level, std::string_view message);
/// Logs `message` only the first time this exact text is seen (for warnings that would repeat per tensor).
void log_once(LogLevel level, const std::string& message);

template <class... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::Debug) log_message(LogLevel::Debug, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::Info) log_message(LogLevel::Info, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void log_warning(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::Warning) log_message(LogLevel::Warning, fmt::format(f, std::forward<Args>(args)...));
}

/// Collects every message (at any level >= min) logged while alive; restores the previous sink and level after.
class ScopedLogCapture {
 public:
  explicit ScopedLogCapture(LogLevel min = LogLevel::Debug);
  ~ScopedLogCapture();
  ScopedLogCapture(const ScopedLogCapture&) = delete;
  ScopedLogCapture& operator=(const ScopedLogCapture&) = delete;

  std::vector<std::string> messages() const;
  /// True when some captured message contains `needle`.
  bool contains(std::string_view needle) const;

 private:
  mutable std::mutex mu_;
  std::vector<std::string> messages_;
  LogSink previous_;
  LogLevel previous_level_;
};

}  // namespace ferry
