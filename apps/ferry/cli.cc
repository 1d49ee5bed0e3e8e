// Shared pieces of the `ferry` subcommands (see cli.h).
#include "cli.h"

#include <unistd.h>

#include <chrono>
#include <cmath>

#include <fmt/format.h>
#include <map>

#include "ferry/big_modeling/module_sizes.h"
#include "ferry/big_modeling/pipeline.h"
#include "ferry/core/cpu_features.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/core/thread_pool.h"
#include "ferry/models/causal_lm.h"
#include "ferry/models/config.h"
#include "ferry/models/gguf_model.h"

namespace ferry::cli {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

}  // namespace

void ModelFlags::add_to(CLI::App& cmd, bool positional_model) {
  auto* m = cmd.add_option("-m,--model", model, "Hugging Face model folder (config.json + weights)");
  if (positional_model) cmd.add_option("folder", model, "the model folder (same as -m)")->excludes(m);
  cmd.add_option("--device-map", device_map,
                 "auto | balanced | balanced_low_0 | sequential | fast | cpu | a device-map JSON file (fast: what "
                 "every generated token reads gets the fastest memory first, a seq2seq model's encoder last)");
  cmd.add_option("--max-memory", max_memory, "budget per device, e.g. 0=20GiB,cpu=64GiB (GiB = 2^30, GB = 10^9)");
  cmd.add_option("--offload-folder", offload_folder, "folder for weights offloaded to disk");
  cmd.add_option("--dtype", dtype,
                 "weights dtype: f32, f16, bf16 (default: config.json's; for a GGUF file, a dtype dequantizes it)");
  cmd.add_option("--quantize", quantize,
                 "quantize Linear and Embedding weights while loading: q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k");
  cmd.add_option("--no-split", no_split, "module classes never split across devices (default: the block class)")
      ->delimiter(',');
  cmd.add_option("--context,--ctx,--ctx-size", context,
                 "tokens a sequence may hold, prompt + generated: the plan reserves their KV cache and generation "
                 "stops there (0, the default: the model's context, and no reservation: Accelerate's plan)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("-t,--threads", threads, "CPU threads (default: all cores)")->check(CLI::NonNegativeNumber);
  cmd.add_option("--isa", isa,
                 "CPU kernels to use at most: scalar, avx2, avx512 or amx (default: the best this CPU runs; as "
                 "FERRY_ISA), for comparisons and bug reports")
      ->check(CLI::IsMember({"scalar", "avx2", "avx512", "amx"}));
  cmd.add_flag("--no-disk", no_disk, "never offload to disk: fail (with the numbers) when the budget is too small");
  cmd.add_option_function<std::string>(
         "--prefetch", [this](const std::string& s) { prefetch = parse_prefetch(s, "--prefetch"); },
         "offloaded modules to read ahead while one computes: auto (default: 2 or 0, whichever the first tokens "
         "measure faster, checked again as the run goes), a number, or 0 (read each when it starts, as Accelerate "
         "does)")
      ->check(
          [](const std::string& s) {
            try {
              parse_prefetch(s, "--prefetch");
              return std::string();
            } catch (const Error& e) {
              return e.problem();
            }
          },
          "auto|N");
  cmd.add_option("--offload-io", offload_io,
                 "how disk-placed weights are read: direct (O_DIRECT into a staging pool counted in the plan, for "
                 "models bigger than RAM), mmap (the page cache), auto (default: direct when the disk part exceeds "
                 "what RAM can cache)")
      ->check(CLI::IsMember({"auto", "direct", "mmap"}));
  auto* nm = cmd.add_flag("--no-mmap", no_mmap,
                          "copy cpu-placed weights into memory of their own, which the kernel cannot drop and re-read "
                          "(default when the disk part is read direct)");
  cmd.add_flag("--mmap", mmap, "keep cpu-placed weights as zero-copy views of the checkpoint (default otherwise)")
      ->excludes(nm);
  cmd.add_flag("--mlock", mlock, "lock cpu-placed weights in RAM so they are never paged out");
  auto* ex = cmd.add_option("--experts", experts,
                            "mixtures of experts: put every expert on the cpu or on disk, the dense parts as planned "
                            "(llama.cpp's --cpu-moe); an expert on disk is read only when a token routes to it")
                 ->check(CLI::IsMember({"cpu", "disk"}));
  cmd.add_option("--n-cpu-moe", n_cpu_moe,
                 "mixtures of experts: put the experts of the first N layers on the cpu (llama.cpp's --n-cpu-moe)")
      ->check(CLI::NonNegativeNumber)
      ->excludes(ex);
  cmd.add_option("--moe-plan", moe_plan,
                 "mixtures of experts: experts (default: each expert a unit of the plan, the dense parts placed "
                 "first, so RAM holds what every token reads) or layers (Accelerate's plan, whole decoder layers)")
      ->check(CLI::IsMember({"experts", "layers"}));
  cmd.add_option("--expert-cache", expert_cache,
                 "mixtures of experts with experts on disk: RAM for an LRU cache of the experts read, e.g. 2GiB; 0 "
                 "reads every routed expert again (default auto: what the plan leaves free of the cpu budget)");
  cmd.add_option("--guess-experts", guess_experts,
                 "mixtures of experts with experts on disk: on reads the experts the next layer's router picks for "
                 "this layer's input a layer ahead; off (default) reads only routed experts. Either way the report "
                 "says how many routed experts the guesses would have covered")
      ->check(CLI::IsMember({"on", "off"}));
  cmd.add_option("--micro-batches", micro_batches,
                 "a pipeline over ranks (mpirun, a device map naming rank1:...): split each forward over several "
                 "sequences (batched generate -i, serve) into N micro-batches in flight, so that the ranks compute at "
                 "the same time (default 0: one per rank)")
      ->check(CLI::Range(0, kMaxMicroBatches));
}

void ModelFlags::apply() const {
  if (threads > 0) set_num_threads(threads);
  if (!isa.empty()) {  // CLI11 has checked the name
    try {
      set_cpu_isa(*isa_from_name(isa));
    } catch (const Error& e) {
      throw Error(ErrorKind::InvalidValue, "--isa " + e.problem(), "", e.hint());
    }
  }
  if (model.empty()) throw Error("no model folder given", "", "pass -m FOLDER (a Hugging Face model folder)");
  if (!std::filesystem::exists(model))
    throw Error(ErrorKind::NotFound, "model folder not found", model,
                "check the path; it must hold config.json and the weights");
  if (models::is_gguf_file(model)) return;  // a llama.cpp GGUF file (models/gguf_model.h)
  if (!std::filesystem::is_directory(model) || !std::filesystem::exists(std::filesystem::path(model) / "config.json")) {
    // A folder without config.json lacks a file (NotFound); a path that is not a folder is a wrong argument.
    throw Error(std::filesystem::is_directory(model) ? ErrorKind::NotFound : ErrorKind::InvalidValue,
                "not a model folder: no config.json", model,
                "point -m at a Hugging Face folder with config.json and *.safetensors or pytorch_model.bin, or at a "
                ".gguf file");
  }
}

std::optional<DType> ModelFlags::dtype_value() const {
  if (dtype.empty()) return std::nullopt;
  return parse_dtype(dtype);
}

std::optional<DType> ModelFlags::quantize_value() const {
  if (quantize.empty()) return std::nullopt;
  DType t;
  try {
    t = parse_dtype(quantize);
  } catch (const Error& e) {
    throw e.with_context("--quantize");
  }
  if (!is_quantized(t))
    throw Error(quantize + " is not a quantized type", "--quantize",
                "use one of q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k (or --dtype for float types)");
  return t;
}

std::optional<MaxMemory> ModelFlags::max_memory_value() const {
  if (max_memory.empty()) return std::nullopt;
  return parse_max_memory_flag(max_memory);
}

std::variant<std::monostate, std::string, DeviceMap> ModelFlags::device_map_value() const {
  if (device_map.empty()) return std::monostate{};
  if (device_map == "auto" || device_map == "balanced" || device_map == "balanced_low_0" ||
      device_map == "sequential" || device_map == "fast" || device_map == "cpu")
    return device_map;
  if (std::filesystem::exists(device_map)) return DeviceMap::read_json_file(device_map);
  throw Error("--device-map '" + device_map + "' is neither a mode nor an existing JSON file", "--device-map",
              "use auto, balanced, balanced_low_0, sequential, fast, cpu or a path to a device-map JSON");
}

models::FromPretrainedOptions ModelFlags::from_pretrained_options() const {
  models::FromPretrainedOptions o;
  o.device_map = device_map_value();
  o.max_memory = max_memory_value();
  o.dtype = dtype_value();
  o.quantize = quantize_value();
  if (!offload_folder.empty()) o.offload_folder = offload_folder;
  o.no_split_module_classes = no_split;
  o.prefetch = prefetch;
  o.offload_io = parse_offload_io(offload_io);
  if (no_mmap) o.use_mmap = false;
  if (mmap) o.use_mmap = true;
  o.mlock = mlock;
  o.plan_by_expert = moe_plan != "layers";
  if (expert_cache != "auto") o.expert_cache_bytes = expert_cache_bytes_value();
  o.guess_experts = guess_experts == "on";
  o.pipeline_micro_batches = micro_batches;
  return o;
}

MaxMemory parse_max_memory_flag(const std::string& text) {
  try {
    return MaxMemory::from_flag(text);
  } catch (const Error& e) {
    throw e.with_context("--max-memory");
  }
}

std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag) {
  std::vector<int64_t> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t comma = text.find(',', start);
    std::string item = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    std::size_t used = 0;
    try {
      out.push_back(std::stoll(item, &used));
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size())
      throw Error("'" + item + "' is not an integer", flag, "write a comma-separated list such as 1,2,3");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

std::string cpu_kernels_description() {
  const Isa isa = cpu_isa();
  std::string d(isa_name(isa));
  if (isa == Isa::AMX) d += " (bf16 linear layers and quantized prefill of 32+ tokens on AMX tiles, the rest AVX-512)";
  else if (isa == Isa::AVX512 && cpu_has_avx512_bf16()) d += " (bf16 linear layers with AVX512_BF16)";
  if (isa < Isa::AMX && !amx_unavailable_reason().empty())
    d += "; AMX not used: " + std::string(amx_unavailable_reason());
  else if (isa < supported_isas().back())
    d += "; capped (FERRY_ISA or --isa), this CPU runs " + std::string(isa_name(supported_isas().back()));
  return d + ", " + std::to_string(num_threads()) + (num_threads() == 1 ? " thread" : " threads");
}

bool stdout_is_tty() { return ::isatty(STDOUT_FILENO) == 1; }
bool stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

void print_table(std::FILE* out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& r : rows)
    for (std::size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  for (std::size_t k = 0; k < rows.size(); ++k) {
    std::string line;
    for (std::size_t i = 0; i < rows[k].size(); ++i) {
      line += rows[k][i];
      if (i + 1 < rows[k].size()) line += std::string(width[i] - rows[k][i].size() + 2, ' ');
    }
    std::fprintf(out, "%s\n", line.c_str());
    if (k == 0) {
      std::size_t total = 0;
      for (auto w : width) total += w + 2;
      std::fprintf(out, "%s\n", std::string(total > 2 ? total - 2 : total, '-').c_str());
    }
  }
}

ProgressBar::ProgressBar(std::string label) : label_(std::move(label)), tty_(stderr_is_tty()), start_(now_seconds()) {}

void ProgressBar::update(const LoadProgress& p) {
  const double t = now_seconds();
  if (!tty_) {
    if (p.shard_index != last_shard_) {
      std::fprintf(stderr, "%s: shard %zu/%zu %s\n", label_.c_str(), p.shard_index, p.shard_count, p.shard_name.c_str());
      last_shard_ = p.shard_index;
    }
    return;
  }
  if (t - last_draw_ < 0.1 && p.bytes_done < p.bytes_total) return;
  last_draw_ = t;
  const double frac = p.bytes_total ? std::min(1.0, double(p.bytes_done) / double(p.bytes_total)) : 1.0;
  const int width = 30, filled = static_cast<int>(frac * width);
  const double elapsed = t - start_;
  const double eta = frac > 0.01 ? elapsed * (1 - frac) / frac : 0;
  std::fprintf(stderr, "\r%s [%s%s] %3d%% %s/%s  shard %zu/%zu  tensors %zu/%zu  ETA %.0fs   ", label_.c_str(),
               std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), int(frac * 100),
               format_bytes(p.bytes_done).c_str(), format_bytes(p.bytes_total).c_str(), p.shard_index, p.shard_count,
               p.tensors_done, p.tensors_in_shard, eta);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (finished_) return;
  finished_ = true;
  if (tty_) std::fprintf(stderr, "\n");
  std::fprintf(stderr, "%s: done in %.2f s\n", label_.c_str(), now_seconds() - start_);
}

int64_t kv_cache_bytes(const models::LanguageModelInfo& info, int64_t tokens) {
  // Keys and values of every (decoder) layer in f32, plus the activations of one prefill chunk (hidden states, the
  // MLP's intermediate, the logits row) — a planning margin, not an exact count.
  const int64_t kv = info.kv_cache_bytes_per_token(DType::F32) * tokens;
  const int64_t act = tokens > 0 ? (tokens * info.hidden_size * 4 * 8 + info.vocab_size * 4 * 2) : 0;
  return kv + act;
}

namespace {

// --experts / --n-cpu-moe applied to a planned map; then how its disk part is read, again.
void place_experts_by_flags(const models::LanguageModel& skeleton, const ModelFlags& flags, PlannedModel& plan) {
  const models::ExpertsInfo& experts = skeleton.model_info().experts;
  const bool asked = !flags.experts.empty() || flags.n_cpu_moe > 0;
  if (!asked) return;
  if (experts.num_experts == 0)
    throw Error(skeleton.model_info().architecture + " has no experts",
                flags.experts.empty() ? "--n-cpu-moe" : "--experts",
                "these flags place the experts of mixture-of-experts models (Mixtral, Qwen2-MoE, Qwen3-MoE)");
  const auto* causal = dynamic_cast<const models::CausalLM*>(&skeleton);
  const std::string layers_prefix = causal ? causal->info().layers_prefix : std::string("model.layers");
  plan.device_map = place_experts(skeleton, plan.device_map, {experts.expert_class},
                                  [&](const std::string& expert) -> std::optional<Device> {
                                    if (flags.experts == "cpu") return Device::cpu();
                                    if (flags.experts == "disk") return Device::disk();
                                    const std::optional<int64_t> layer = expert_layer(expert, layers_prefix);
                                    if (layer && *layer < flags.n_cpu_moe) return Device::cpu();
                                    return std::nullopt;
                                  });
  plan.offload = resolve_offload_io(skeleton, plan.device_map, parse_offload_io(flags.offload_io), flags.prefetch);
}

void count_token_reads(const models::LanguageModel& skeleton, DType dtype, PlannedModel& plan) {
  plan.experts = skeleton.model_info().experts;
  plan.token_reads = per_token_reads(skeleton, plan.device_map,
                                     main_accelerator(plan.device_map).value_or(Device::cpu()),
                                     skeleton.model_info().read_profile(), dtype);
}

}  // namespace

int64_t ModelFlags::expert_cache_bytes_value() const {
  try {
    return convert_file_size_to_int(expert_cache);
  } catch (const Error&) {
    throw Error("bad --expert-cache '" + expert_cache + "'", "--expert-cache", "give auto, 0 or a size such as 2GiB");
  }
}

namespace {

// "auto" or "fast" when the flags plan by one of those modes ("" otherwise).
std::string strategy_mode(const ModelFlags& flags) {
  if (flags.device_map.empty() || flags.device_map == "auto") return "auto";
  return flags.device_map == "fast" ? "fast" : "";
}

// PlannedModel::strategies: the reads of the plan made and of the other strategy's plan for the same flags.
void compare_strategies(const models::LanguageModel& skeleton, const ModelFlags& flags, DType dtype,
                        PlannedModel& plan) {
  const models::LanguageModelInfo& info = skeleton.model_info();
  const std::string mode = strategy_mode(flags);
  if (mode.empty() || (info.prompt_modules.empty() && info.experts.num_experts == 0)) return;
  ModelFlags other_flags = flags;
  other_flags.device_map = mode == "auto" ? "fast" : "auto";
  PlannedModel other = plan_model_unplaced(skeleton, other_flags, dtype);
  place_experts_by_flags(skeleton, other_flags, other);
  count_token_reads(skeleton, dtype, other);
  PlannedModel::StrategyReads mine{mode, true, plan.token_reads},
      theirs{other_flags.device_map, false, other.token_reads};
  plan.strategies = mode == "auto" ? std::vector{mine, theirs} : std::vector{theirs, mine};
}

std::string reads_text(const std::vector<TokenReads>& reads, bool per_prompt) {
  std::string out;
  for (const TokenReads& r : reads) {
    const int64_t bytes = per_prompt ? r.prompt_read_bytes() : static_cast<int64_t>(r.expected_bytes);
    out += (out.empty() ? "" : " + ") + format_bytes(bytes) + " from " + r.device.str();
  }
  return out.empty() ? "nothing" : out;
}

}  // namespace

PlannedModel plan_model(const models::LanguageModel& skeleton, const ModelFlags& flags, DType dtype) {
  PlannedModel out = plan_model_unplaced(skeleton, flags, dtype);
  place_experts_by_flags(skeleton, flags, out);
  count_token_reads(skeleton, dtype, out);
  compare_strategies(skeleton, flags, dtype, out);
  const models::ExpertsInfo& experts = skeleton.model_info().experts;
  const bool experts_on_disk = std::any_of(out.token_reads.begin(), out.token_reads.end(), [](const TokenReads& r) {
    return r.device.is_disk() && r.expert_bytes > 0;
  });
  if (experts.num_experts > 0 && experts_on_disk) {
    PlanOptions budget = out.options;  // auto's cache reservation is part of what the plan leaves to the cache
    std::erase_if(budget.reservations, [](const Reservation& r) { return r.purpose == "expert cache"; });
    if (out.offload.staging_bytes > 0 &&
        std::none_of(budget.reservations.begin(), budget.reservations.end(),
                     [](const Reservation& r) { return r.purpose.find("staging") != std::string::npos; }))
      budget.reservations.push_back({Device::cpu(), static_cast<int64_t>(out.offload.staging_bytes), "staging pool"});
    out.expert_cache_bytes = flags.expert_cache == "auto"
                                 ? default_expert_cache_bytes(skeleton, out.device_map, budget, {experts.expert_class})
                                 : flags.expert_cache_bytes_value();
  }
  return out;
}

PlannedModel plan_model_unplaced(const models::LanguageModel& skeleton, const ModelFlags& flags, DType dtype) {
  PlannedModel out;
  PlanOptions& o = out.options;
  o.max_memory = flags.max_memory_value();
  o.no_split_module_classes = flags.no_split;
  if (o.no_split_module_classes.empty()) o.no_split_module_classes = {skeleton.model_info().block_class};
  o.dtype = dtype;
  o.allow_disk = !flags.no_disk;
  const models::ExpertsInfo& experts = skeleton.model_info().experts;
  if (experts.num_experts > 0 && flags.moe_plan != "layers") o.expert_module_classes = {experts.expert_class};
  o.prompt_modules = skeleton.model_info().prompt_modules;  // placed last by --device-map fast
  auto dm = flags.device_map_value();
  if (auto* map = std::get_if<DeviceMap>(&dm)) {
    out.device_map = *map;
    out.offload = resolve_offload_io(skeleton, out.device_map, parse_offload_io(flags.offload_io), flags.prefetch);
    return out;
  }
  std::string mode = std::holds_alternative<std::string>(dm) ? std::get<std::string>(dm) : "auto";
  if (mode == "cpu") {
    out.device_map = DeviceMap{{"", Device::cpu()}};
    return out;
  }
  // Budgets on several ranks (--max-memory rank0:cpu=...,rank1:cpu=...): a pipeline's map (big_modeling/pipeline.h).
  if (o.max_memory && std::any_of(o.max_memory->entries().begin(), o.max_memory->entries().end(),
                                  [](const MaxMemory::Entry& e) { return e.device.rank != 0; })) {
    const auto* causal = dynamic_cast<const models::CausalLM*>(&skeleton);
    if (causal == nullptr)
      throw Error("budgets on several ranks plan a pipeline, which runs decoder-only models", "--max-memory",
                  "give budgets to one rank");
    if (mode != "auto" && mode != "sequential" && mode != "balanced")
      throw Error("a pipeline over ranks is planned with --device-map auto, sequential or balanced, not " + mode,
                  "--device-map", "");
    out.device_map = infer_device_map_over_ranks(skeleton, causal->info().layers_prefix, *o.max_memory,
                                                 mode == "balanced", dtype);
    return out;
  }
  if (flags.context > 0) {
    MaxMemory budget = get_max_memory(o.max_memory);
    Device main = Device::cpu();
    for (const auto& e : budget.entries())
      if (e.device.is_accelerator() && e.bytes > 0) {
        main = e.device;
        break;
      }
    o.reservations.push_back({main, kv_cache_bytes(skeleton.model_info(), flags.context),
                              "KV cache for " + std::to_string(flags.context) + " tokens"});
  }
  // An expert cache of a given size is RAM the plan cannot give to weights; auto reserves one before experts are
  // placed in RAM when it would hold a token's experts (expert_cache_reservation), and takes what the plan leaves.
  if (experts.num_experts > 0 && flags.expert_cache != "auto") {
    if (const int64_t cache = flags.expert_cache_bytes_value(); cache > 0)
      o.reservations.push_back({Device::cpu(), cache, "expert cache"});
  } else if (!o.expert_module_classes.empty()) {
    if (const int64_t r = expert_cache_reservation(skeleton, o, o.expert_module_classes, experts.experts_per_token);
        r > 0)
      o.reservations.push_back({Device::cpu(), r, "expert cache"});
  }
  OffloadPlan planned = plan_with_offload_io(skeleton, parse_device_map_mode(mode), o,
                                             parse_offload_io(flags.offload_io), flags.prefetch);
  out.device_map = std::move(planned.device_map);
  out.options = std::move(planned.options);
  out.offload = planned.choice;
  return out;
}

void print_plan(std::FILE* out, const nn::Module& skeleton, const PlannedModel& plan) {
  std::fputs(format_plan(skeleton, plan.device_map, plan.options).c_str(), out);
  for (const TokenReads& r : plan.token_reads) {
    if (plan.experts.num_experts == 0) {
      std::fprintf(out, "per token: %s read from %s", format_bytes(static_cast<int64_t>(r.expected_bytes)).c_str(),
                   r.device.str().c_str());
      if (r.table_bytes > 0)
        std::fprintf(out, " (embedding tables read by the row: %s of the %s there)",
                     format_bytes(r.table_row_bytes).c_str(), format_bytes(r.table_bytes).c_str());
      if (r.prompt_bytes > 0) std::fprintf(out, " (and %s once per prompt)", format_bytes(r.prompt_bytes).c_str());
      std::fputs("\n", out);
      continue;
    }
    std::fprintf(out,
                 "per token: %s read from %s expected (dense %s + routed experts %s: %lld of %lld per layer, of the "
                 "%s of experts placed there)\n",
                 format_bytes(static_cast<int64_t>(r.expected_bytes)).c_str(), r.device.str().c_str(),
                 format_bytes(r.dense_bytes).c_str(),
                 format_bytes(static_cast<int64_t>(r.expected_bytes) - r.dense_bytes - r.table_row_bytes).c_str(),
                 static_cast<long long>(plan.experts.experts_per_token),
                 static_cast<long long>(plan.experts.num_experts), format_bytes(r.expert_bytes).c_str());
    if (r.device.is_disk() && r.expert_bytes > 0)
      std::fprintf(out, "expert cache: %s of RAM (LRU) for the experts read from disk%s\n",
                   format_bytes(plan.expert_cache_bytes).c_str(),
                   plan.expert_cache_bytes == 0 ? ": none, every routed expert is read again" : "");
  }
  if (!plan.strategies.empty()) {
    std::fprintf(out, "reads off %s by plan (--device-map auto: Accelerate's order; fast: per-token modules first):\n",
                 main_accelerator(plan.device_map).value_or(Device::cpu()).str().c_str());
    for (const PlannedModel::StrategyReads& s : plan.strategies)
      std::fprintf(out, "  %-4s%s  per generated token: %s; per prompt: %s\n", s.mode.c_str(),
                   s.chosen ? " (this plan)" : "            ", reads_text(s.reads, false).c_str(),
                   reads_text(s.reads, true).c_str());
  }
  if (disk_bytes_of(skeleton, plan.device_map) > 0) {
    if (plan.offload.io == OffloadIo::Direct)
      std::fprintf(out, "disk reads: direct (O_DIRECT into a %s staging pool, reserved above)\n",
                   format_bytes(static_cast<int64_t>(plan.offload.staging_bytes)).c_str());
    else
      std::fprintf(out, "disk reads: mmap (page cache; RAM can hold the disk part)\n");
  }
}

void print_cpu_weights(std::FILE* out, const ModelFlags& flags, const PlannedModel& plan) {
  bool cpu = false;
  for (const auto& [name, d] : plan.device_map) cpu = cpu || d.is_cpu();
  if (!cpu) return;
  const std::optional<Device> gpu = main_accelerator(plan.device_map);
  if (gpu && gpu->is_cuda()) {  // dispatch_model copies them into pinned memory (DispatchOptions::pin_cpu_weights)
    std::fprintf(out, "cpu weights: copied into pinned (page-locked) memory, streamed to %s by DMA%s\n",
                 gpu->str().c_str(), flags.prefetch != 0 ? " ahead of use" : "");
    return;
  }
  const bool copy = flags.no_mmap || (!flags.mmap && plan.offload.io == OffloadIo::Direct);
  std::fprintf(out, "cpu weights: %s%s\n",
               !flags.quantize.empty() ? "quantized while loading, into memory of their own (--quantize)"
               : copy                  ? "copied into memory of their own (--no-mmap; the default when RAM is short)"
                                       : "zero-copy views of the checkpoint (mmap; --no-mmap copies them)",
               flags.mlock ? ", locked in RAM (--mlock)" : "");
}

}  // namespace ferry::cli
