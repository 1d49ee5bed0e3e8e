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
#include "ferry/core/logging.h"
#include "ferry/models/config.h"
#include "ferry/models/gguf_model.h"
#include "ferry/text/pretrained.h"
#include "ferry/text/speculative.h"

namespace ferry::cli {

std::vector<std::filesystem::path> weight_files(const std::filesystem::path& model) {
  if (std::filesystem::is_regular_file(model)) return {model};
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(model, ec)) {
    const std::string ext = e.path().extension().string();
    if (e.is_regular_file(ec) && (ext == ".safetensors" || ext == ".gguf" || ext == ".bin")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<io::DiskBandwidth> disk_bound_for(const std::filesystem::path& model, std::FILE* log) {
  if (auto cached = io::cached_disk_bandwidth(model)) return cached;
  const std::vector<std::filesystem::path> files = weight_files(model);
  std::uintmax_t bytes = 0;
  std::error_code ec;
  for (const auto& f : files) bytes += std::filesystem::file_size(f, ec);
  if (bytes < (std::uintmax_t{256} << 20)) return std::nullopt;  // too little to measure a disk by
  io::DiskBandwidthOptions o;
  o.max_in_flight_bytes = std::size_t{64} << 20;  // before loading, but inside the run's memory budget
  o.bytes_per_point = std::size_t{64} << 20;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    io::DiskBandwidth bw = io::measure_disk_bandwidth(files, o);
    io::save_disk_bandwidth(bw);
    if (log)
      std::fprintf(log,
                   "disk %s: O_DIRECT reads reach %.2f GB/s (%s × %u in flight), measured once in %.1f s and "
                   "kept in %s (ferry bench --disk measures again)\n",
                   bw.device.c_str(), bw.best.gb_per_s,
                   format_bytes(static_cast<int64_t>(bw.best.request_bytes)).c_str(), bw.best.queue_depth,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                   io::disk_bandwidth_cache_file().c_str());
    return bw;
  } catch (const Error& e) {
    log_info("the disk's O_DIRECT bound was not measured: {}", e.what());
    return std::nullopt;
  }
}

LoadedModel load_for_run(const ModelFlags& flags, std::FILE* log) {
  flags.apply();
  LoadedModel out;
  out.dtype = flags_dtype(flags);
  std::shared_ptr<models::LanguageModel> skeleton = build_skeleton(flags, out.dtype);
  out.architecture = skeleton->model_info().architecture;
  out.plan = plan_model(*skeleton, flags, out.dtype);
  out.usage = device_map_usage(*skeleton, out.plan.device_map, out.dtype);
  const Device main = main_accelerator(out.plan.device_map).value_or(Device::cpu());
  for (const TokenReads& r : out.plan.token_reads)  // routed experts at their expected share
    out.streamed_bytes_per_forward += static_cast<int64_t>(r.expected_bytes);
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
    out.disk_bound = disk_bound_for(flags.model, log);
    if (out.disk_bound) {  // the request size and queue depth this disk reads fastest with
      const io::DiskReadPoint p = io::best_read_point(*out.disk_bound);
      ro.chunk_bytes = p.request_bytes;
      ro.queue_depth = std::max(p.queue_depth, 2u);
    }
    out.staged_reader = std::make_shared<io::StagedReader>(main.is_cuda() ? pinned_staging(std::move(ro)) : std::move(ro));
    o.staged_reader = out.staged_reader;
  }
  out.prefetch_setting = flags.prefetch;
  out.prefetcher = Prefetcher::create(flags.prefetch, "--prefetch");
  o.prefetcher = out.prefetcher;
  if (out.plan.experts.num_experts > 0) {
    o.expert_cache_bytes = out.plan.expert_cache_bytes;
    out.expert_cache = std::make_shared<ExpertCache>();
    o.expert_cache = out.expert_cache;
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

LoadedModel load_draft_model(const std::string& path, const LoadedModel& target, const std::string& target_path) {
  ModelFlags d;
  d.model = path;
  d.device_map = "cpu";
  d.apply();
  try {
    LoadedModel draft = load_for_run(d, nullptr);
    text::check_draft_model(*draft.model, *target.model);
    return draft;
  } catch (const Error& e) {
    throw e.with_context("--draft-model " + path + " for " + target_path);
  }
}

}  // namespace ferry::cli
