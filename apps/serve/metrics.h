// /metrics: the server's counters in Prometheus' text exposition format (version 0.0.4).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "serve/engine.h"

namespace ferry::serve {

/// What the HTTP side counts (the engine counts the rest: EngineStats).
struct HttpStats {
  std::map<std::pair<std::string, int>, uint64_t> requests;  // (endpoint, status) -> count
  double ttft_seconds_sum = 0;                               // time to first token of streamed requests
  uint64_t ttft_count = 0;
  uint64_t streamed_bytes_per_forward = 0;                   // weights materialised from cpu/disk per forward
  uint64_t disk_read_bytes = 0;                              // read from storage since the server started
};

/// The exposition text: HELP/TYPE lines and samples, every metric prefixed "ferry_".
std::string render_metrics(const EngineStats& engine, const HttpStats& http);

}  // namespace ferry::serve
