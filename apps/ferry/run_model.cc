// load_for_run (see run_model.h).
#include "run_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>

#include "ferry/big_modeling/module_sizes.h"
#include "ferry/big_modeling/offload_plan.h"
#include "ferry/core/backend.h"
#include "ferry/core/error.h"
#include "ferry/models/config.h"
#include "ferry/models/gguf_model.h"
#include "ferry/text/pretrained.h"

namespace ferry::cli {

LoadedModel load_for_run(const ModelFlags& flags, std::FILE* log) {
  flags.apply();
  LoadedModel out;
  out.dtype = flags_dtype(flags);
  std::shared_ptr<models::LanguageModel> skeleton = build_skeleton(flags, out.dtype);
  out.architecture = skeleton->model_info().architecture;
  out.plan = plan_model(*skeleton, flags, out.dtype);
  out.usage = device_map_usage(*skeleton, out.plan.device_map, out.dtype);
  const ModuleSizes sizes = compute_module_sizes(*skeleton, out.dtype);
  const Device main = main_accelerator(out.plan.device_map).value_or(Device::cpu());
  for (const auto& [name, d] : out.plan.device_map)
    if (d.is_disk() || (d.is_cpu() && !main.is_cpu())) out.streamed_bytes_per_forward += sizes[name];
  if (log) {
    std::fprintf(log, "%s, %s weights, plan:\n\n", out.architecture.c_str(), weights_dtypes(*skeleton).c_str());
    print_plan(log, *skeleton, out.plan);
    print_cpu_weights(log, flags, out.plan);
    std::fprintf(log, "\n");
    std::fflush(log);
  }
  skeleton.reset();

  models::FromPretrainedOptions o = flags.from_pretrained_options();
  o.device_map = out.plan.device_map;
  o.offload_io = out.plan.offload.io;
  if (out.plan.offload.io == OffloadIo::Direct && out.plan.offload.staging_bytes > 0) {
    io::StagedReaderOptions ro{.pool_bytes = out.plan.offload.staging_bytes};
    out.staged_reader = std::make_shared<io::StagedReader>(main.is_cuda() ? pinned_staging(std::move(ro)) : std::move(ro));
    o.staged_reader = out.staged_reader;
  }
  // A GGUF file keeps its quantized tensors unless --dtype asks to dequantize them.
  o.dtype = models::is_gguf_file(flags.model) ? flags.dtype_value() : std::optional<DType>(out.dtype);
  ProgressBar bar("loading");
  o.on_progress = [&bar](const LoadProgress& p) { bar.update(p); };
  auto t0 = std::chrono::steady_clock::now();
  out.model = models::load_language_model(flags.model, o);
  out.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  bar.finish();
  out.eos_token_ids = text::load_eos_token_ids(flags.model);
  return out;
}

nlohmann::json loaded_model_json(const LoadedModel& lm, const text::ChatTemplate* chat) {
  const DeviceMap map = lm.model->hf_device_map().value_or(lm.plan.device_map);
  return {{"architecture", lm.architecture},
          {"device_map", nlohmann::json::parse(map.to_json())},
          {"eos_token_ids", lm.eos_token_ids},
          {"chat_template", chat ? nlohmann::json(chat->source()) : nlohmann::json()}};
}

std::uint64_t process_disk_read_bytes() {
  std::ifstream in("/proc/self/io");
  std::string key;
  std::uint64_t value = 0;
  while (in >> key >> value)
    if (key == "read_bytes:") return value;
  return 0;
}

std::string disk_io_line(const LoadedModel& lm, std::size_t forwards, std::uint64_t read_bytes_before) {
  bool has_disk = false;
  for (const auto& [name, d] : lm.plan.device_map) has_disk = has_disk || d.is_disk();
  if (!has_disk) return "";
  if (!lm.staged_reader) {
    const std::uint64_t now = process_disk_read_bytes(), read = now > read_bytes_before ? now - read_bytes_before : 0;
    return fmt::format("disk io: mmap (page cache), {} read from disk per forward",
                       format_bytes(static_cast<int64_t>(read / std::max<std::size_t>(forwards, 1))));
  }
  const io::StagedReaderStats s = lm.staged_reader->stats();
  std::string line = fmt::format("disk io: direct ({}, {})", s.io_uring ? "io_uring" : "pread",
                                 s.direct ? "O_DIRECT" : "buffered: the filesystem refused O_DIRECT");
  if (forwards > 0)
    line += fmt::format(", {} read per forward", format_bytes(static_cast<int64_t>(s.bytes_read / forwards)));
  if (s.read_seconds > 0) line += fmt::format(", {:.2f} GB/s while reading", s.bytes_read / s.read_seconds / 1e9);
  line += fmt::format(", staging peak {}", format_bytes(static_cast<int64_t>(s.pool_peak + s.overflow_peak)));
  return line;
}

H2dTraffic h2d_traffic(std::uint64_t h2d_before, std::size_t forwards, double seconds) {
  H2dTraffic t;
  const std::uint64_t now = transfer_stats().host_to_device;
  t.bytes = now > h2d_before ? now - h2d_before : 0;
  t.bytes_per_forward = static_cast<double>(t.bytes) / static_cast<double>(std::max<std::size_t>(forwards, 1));
  t.gb_per_s = seconds > 0 ? static_cast<double>(t.bytes) / seconds / 1e9 : 0;
  return t;
}

std::string h2d_line(const H2dTraffic& t) {
  if (t.bytes == 0) return "";
  return fmt::format("host→device: {} per forward, {:.2f} GB/s", format_bytes(static_cast<int64_t>(t.bytes_per_forward)),
                     t.gb_per_s);
}

}  // namespace ferry::cli
