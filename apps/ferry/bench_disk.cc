// bench_disk (see bench_disk.h).
#include "bench_disk.h"

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "ferry/big_modeling/max_memory.h"  // format_bytes
#include "ferry/core/error.h"
#include "ferry/io/disk_bandwidth.h"
#include "run_model.h"

namespace ferry::cli {

void bench_disk(const std::filesystem::path& model, bool json) {
  if (model.empty()) throw Error("--disk needs a model to read", "--disk", "pass -m MODEL: its weight files are read");
  const std::vector<std::filesystem::path> files = weight_files(model);
  if (files.empty())
    throw Error(ErrorKind::NotFound, "no weight files (.safetensors, .gguf, .bin) to read", model.string(),
                "pass a model folder or a GGUF file");
  const io::DiskBandwidth bw = io::measure_disk_bandwidth(files);
  io::save_disk_bandwidth(bw);
  if (json) {
    nlohmann::json grid = nlohmann::json::array();
    for (const auto& p : bw.grid)
      grid.push_back({{"request_bytes", p.request_bytes}, {"queue_depth", p.queue_depth}, {"gb_per_s", p.gb_per_s}});
    std::printf("%s\n", nlohmann::json{{"device", bw.device},
                                       {"measured_at", bw.measured_at},
                                       {"bytes_per_point", bw.bytes_per_point},
                                       {"best_gb_per_s", bw.best.gb_per_s},
                                       {"grid", grid},
                                       {"cache", io::disk_bandwidth_cache_file().string()}}
                            .dump(2)
                            .c_str());
    return;
  }
  std::vector<std::vector<std::string>> table{{"request", "in flight", "GB/s", ""}};
  for (const auto& p : bw.grid)
    table.push_back({format_bytes(static_cast<int64_t>(p.request_bytes)), std::to_string(p.queue_depth),
                     fmt::format("{:.2f}", p.gb_per_s),
                     p.request_bytes == bw.best.request_bytes && p.queue_depth == bw.best.queue_depth ? "best" : ""});
  std::printf("disk %s, O_DIRECT reads of %s per point (io_uring):\n\n", bw.device.c_str(),
              format_bytes(static_cast<int64_t>(bw.bytes_per_point)).c_str());
  print_table(stdout, table);
  const io::DiskReadPoint used = io::best_read_point(bw);
  std::printf("\nbound %.2f GB/s; offloaded weights are read in %s requests, %u in flight (cached in %s)\n",
              bw.best.gb_per_s, format_bytes(static_cast<int64_t>(used.request_bytes)).c_str(), used.queue_depth,
              io::disk_bandwidth_cache_file().c_str());
}

}  // namespace ferry::cli
