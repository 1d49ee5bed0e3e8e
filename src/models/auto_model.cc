// The auto-model factory: config.json -> architecture -> skeleton (under init_empty_weights) -> weights, either
// resident on the cpu (resident_loading.h) or planned, loaded and dispatched by big_modeling (the steps of its
// load_checkpoint_and_dispatch, with a missing-weight check between loading and dispatching).
#include "ferry/models/auto_model.h"

#include <algorithm>
#include <functional>
#include <set>
#include <unordered_map>

#include "ferry/big_modeling/auto_device_map.h"
#include "ferry/big_modeling/dispatch.h"
#include "ferry/big_modeling/experts.h"
#include "ferry/big_modeling/load_checkpoint.h"
#include "ferry/big_modeling/offload_plan.h"
#include "ferry/big_modeling/pipeline.h"
#include "ferry/big_modeling/quantize.h"
#include "ferry/big_modeling/resident_weights.h"
#include "ferry/core/error.h"
#include "ferry/core/logging.h"
#include "ferry/core/quant.h"
#include "ferry/core/version.h"
#include "ferry/io/checkpoint.h"
#include "ferry/models/architectures.h"
#include "ferry/models/gguf_model.h"
#include "ferry/models/moe.h"
#include "ferry/models/pipeline.h"
#include "ferry/nn/empty_weights.h"
#include "ferry/nn/module_tensors.h"
#include "ferry/nn/tied.h"
#include "resident_loading.h"

namespace ferry::models {

namespace {

// A checkpoint key reported missing is really missing unless a tied partner was loaded (one slot, two names).
std::vector<std::string> truly_missing(const nn::Module& model, const std::vector<std::string>& reported) {
  std::set<std::string> missing(reported.begin(), reported.end());
  std::vector<std::string> out;
  for (const std::string& name : reported) {
    bool tied_to_loaded = false;
    for (const auto& group : nn::find_tied_parameters(model)) {
      if (std::find(group.begin(), group.end(), name) == group.end()) continue;
      for (const std::string& other : group) tied_to_loaded = tied_to_loaded || !missing.count(other);
    }
    if (!tied_to_loaded) out.push_back(name);
  }
  return out;
}

// device_map modes and maps, as transformers' from_pretrained does it: plan (modes), load into the plan, check that
// nothing is missing, dispatch. (big_modeling's load_checkpoint_and_dispatch does the same minus the check, which
// must come before dispatch_model: a missing weight is otherwise reported as an obscure meta-device error there.)
// Returns how the disk part is read (Mmap when there is none).
// from_pretrained's keywords as the planner's: max_memory, no_split_module_classes (default: the block class).
// Mixtures of experts are planned by the expert unless the caller asks for Accelerate's layer-granular plan.
PlanOptions plan_options(const LanguageModelInfo& info, const FromPretrainedOptions& options) {
  PlanOptions plan;
  plan.max_memory = options.max_memory;
  plan.no_split_module_classes = options.no_split_module_classes;
  if (plan.no_split_module_classes.empty()) plan.no_split_module_classes = {info.block_class};
  if (info.experts.num_experts > 0 && options.plan_by_expert) plan.expert_module_classes = {info.experts.expert_class};
  plan.prompt_modules = info.prompt_modules;  // placed last by device_map="fast"
  // An expert cache of a given size is RAM the plan cannot give to weights (by default: what the plan leaves).
  if (info.experts.num_experts > 0 && options.expert_cache_bytes.value_or(0) > 0)
    plan.reservations.push_back({Device::cpu(), *options.expert_cache_bytes, "expert cache"});
  return plan;
}

// plan_options for planning a device map: with `auto`'s expert cache reserved before experts are placed in RAM
// (expert_cache_reservation; three quarters of the room at most, so the staging pool reserved next never pushes
// dense parts out — the cache gets whatever the plan leaves anyway, expert_cache_for).
PlanOptions planning_options(const LanguageModel& model, const FromPretrainedOptions& options,
                             std::optional<DType> dtype) {
  const LanguageModelInfo& info = model.model_info();
  PlanOptions plan = plan_options(info, options);
  plan.dtype = dtype;
  if (info.experts.num_experts > 0 && options.plan_by_expert && !options.expert_cache_bytes)
    if (const int64_t r = expert_cache_reservation(model, plan, {info.experts.expert_class},
                                                   info.experts.experts_per_token);
        r > 0)
      plan.reservations.push_back({Device::cpu(), r, "expert cache"});
  return plan;
}

// DispatchOptions::expert_cache of a mixture of experts (FromPretrainedOptions::expert_cache_bytes; by default what
// the plan leaves free of the cpu budget once the staging pool is reserved). Null for dense models and zero sizes.
std::shared_ptr<ExpertCache> expert_cache_for(const LanguageModel& model, const DeviceMap& map,
                                              const FromPretrainedOptions& options, std::optional<DType> dtype,
                                              int64_t staging_bytes) {
  const ExpertsInfo& experts = model.model_info().experts;
  if (experts.num_experts == 0) return nullptr;
  int64_t bytes = 0;
  if (options.expert_cache_bytes) {
    bytes = *options.expert_cache_bytes;
  } else {
    PlanOptions plan = plan_options(model.model_info(), options);
    plan.dtype = dtype;
    if (staging_bytes > 0) plan.reservations.push_back({Device::cpu(), staging_bytes, "staging pool"});
    bytes = default_expert_cache_bytes(model, map, plan, {experts.expert_class});
  }
  if (bytes < 0) throw Error("expert_cache_bytes is negative", "FromPretrainedOptions", "give 0 for no cache");
  std::shared_ptr<ExpertCache> cache = options.expert_cache ? options.expert_cache : std::make_shared<ExpertCache>();
  cache->classes = {experts.expert_class};
  cache->capacity_bytes = static_cast<std::size_t>(bytes);
  cache->map.reset();
  return cache;
}

// The device map's entries for the decoder blocks (layers_prefix.N), in the order they run. Each block must have
// its own entry (a block split between entries cannot be split between ranks: its parts' outputs are combined).
std::vector<std::string> pipeline_blocks(const LanguageModel& model, const DeviceMap& map) {
  const auto* causal = dynamic_cast<const CausalLM*>(&model);
  if (causal == nullptr) throw Error("a pipeline over ranks runs decoder-only models", "device map");
  const std::string prefix = causal->info().layers_prefix + ".";
  std::vector<std::pair<int64_t, std::string>> blocks;
  for (const auto& [name, device] : map) {
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    if (rest.empty() || !std::all_of(rest.begin(), rest.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      if (device.rank != 0 || has_ranks(map))
        throw Error("a pipeline passes activations between ranks only between whole decoder blocks, and " + name +
                        " is part of one",
                    "device map", "give each block (" + prefix + "N) one entry, on one rank");
      continue;
    }
    blocks.emplace_back(std::stoll(rest), name);
  }
  std::sort(blocks.begin(), blocks.end());
  std::vector<std::string> out;
  for (auto& b : blocks) out.push_back(std::move(b.second));
  return out;
}

// Every rank of a pipeline must run the same ferry with the same model and map: each sends rank 0 what it runs (the
// version, config.json, the checkpoint files' names and sizes, the map); rank 0 compares and tells every rank the
// verdict, so all of them stop with the same message naming the rank that differs.
void check_same_job(ProcessGroup& group, const std::filesystem::path& folder, const DeviceMap& map) {
  constexpr int kTag = 7004;
  const bool is_folder = std::filesystem::is_directory(folder);
  std::string mine = "ferry " + std::string(kVersion) + " pipeline 1\nconfig " +
                     (is_folder ? std::to_string(std::hash<std::string>{}(ConfigJson::read(folder).json().dump()))
                                : folder.filename().string()) +
                     "\nfiles";
  if (!is_folder) mine += " " + std::to_string(std::filesystem::file_size(folder));
  if (is_folder) {
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(folder))
      if (e.is_regular_file() && e.path().extension() == ".safetensors")
        files.push_back(e.path().filename().string() + ":" + std::to_string(e.file_size()));
    std::sort(files.begin(), files.end());
    for (const auto& f : files) mine += " " + f;
  }
  mine += "\nmap " + map.to_json();
  std::string verdict;
  if (group.rank() == 0) {
    for (int r = 1; r < group.size() && verdict.empty(); ++r) {
      const std::string theirs = group.recv_string(r, kTag);
      if (theirs == mine) continue;
      std::size_t line = 0;  // the first line that differs names what
      while (line < theirs.size() && line < mine.size() && theirs[line] == mine[line]) ++line;
      const std::size_t start = mine.rfind('\n', line == 0 ? 0 : line - 1);
      const std::string what = mine.substr(start == std::string::npos ? 0 : start + 1, 6);
      verdict = "rank " + std::to_string(r) + " runs another " +
                (what.rfind("ferry", 0) == 0    ? "ferry version"
                 : what.rfind("config", 0) == 0 ? "model (its config.json differs)"
                 : what.rfind("files", 0) == 0  ? "model (its weight files differ)"
                                                : "device map") +
                " than rank 0";
    }
  } else {
    group.send_string(mine, 0, kTag);
  }
  group.broadcast_string(verdict, 0);
  if (!verdict.empty())
    throw Error(verdict, "pipeline", "run the same ferry build with the same model folder and map on every rank");
}

// One rank's part of a model split over ranks by a device map that names them (big_modeling/pipeline.h): it loads
// and dispatches its own entries only, and joins the pipeline — rank 0 leads it, the others follow.
OffloadIo load_pipeline_part(LanguageModel& model, const std::filesystem::path& folder,
                             const FromPretrainedOptions& options, const DeviceMap& map,
                             const std::string& base_model_prefix, DType dtype) {
  const LanguageModelInfo& info = model.model_info();
  std::shared_ptr<ProcessGroup> group = options.process_group ? options.process_group : world_process_group();
  if (info.is_encoder_decoder)
    throw Error("a pipeline over ranks runs decoder-only models; " + info.architecture + " is an encoder-decoder",
                "device map", "place the whole model on one rank");
  check_same_job(*group, folder, map);
  const RankShare share = rank_share(model, map, group->rank(), group->size());
  const std::vector<std::string> blocks = pipeline_blocks(model, map);
  check_pipeline_map(model, map, blocks);
  const bool has_disk = std::any_of(share.local.begin(), share.local.end(), [&](const auto& e) {
    return e.second.is_disk() && std::find(share.remote.begin(), share.remote.end(), e.first) == share.remote.end();
  });
  LoadCheckpointOptions load;
  load.device_map = share.local;
  load.skip_modules = share.remote;
  if (!options.offload_folder.empty()) load.offload_folder = options.offload_folder;
  load.dtype = dtype;
  load.offload_state_dict = options.offload_state_dict.value_or(has_disk);
  load.base_model_prefix = base_model_prefix;
  load.on_progress = options.on_progress;
  const LoadCheckpointResult loaded = load_checkpoint_in_model(model, folder, load);
  const std::vector<std::string> missing = truly_missing(model, loaded.missing_keys);
  if (!missing.empty())
    throw Error("the checkpoint lacks " + std::to_string(missing.size()) +
                    " tensor(s) this rank needs: " + missing.front(),
                folder.string(), "Are config.json and the weights from the same model?");
  const OffloadIoChoice io = resolve_offload_io(model, share.local, options.offload_io, options.prefetch);
  DispatchOptions dispatch;
  if (load.offload_folder) dispatch.offload_dir = load.offload_folder;
  dispatch.offload_index = loaded.offload_index;
  dispatch.skip_keys = {"past_key_values"};
  dispatch.prefetch = options.prefetch;
  dispatch.offload_io = io.io;
  dispatch.staging_bytes = io.staging_bytes;
  dispatch_model(model, share.local, dispatch);
  attach_pipeline_hooks(model, map, blocks, group);
  model.set_pipeline_group(group);
  if (group->rank() == 0)
    model.set_pipeline_leader(std::make_shared<PipelineLeader>(group, options.pipeline_micro_batches));
  model.set_hf_device_map(map);
  return io.io;
}

OffloadIo load_and_dispatch(LanguageModel& model, const std::string& base_model_prefix,
                            const std::filesystem::path& folder, const FromPretrainedOptions& options, DType dtype) {
  const LanguageModelInfo& info = model.model_info();
  DeviceMap map;
  OffloadIoChoice io;
  if (const auto* mode = std::get_if<std::string>(&options.device_map)) {
    const PlanOptions plan = planning_options(model, options, dtype);
    // Direct disk reads: the staging pool is reserved from the cpu budget (unless the caller brings a reader).
    OffloadPlan planned = plan_with_offload_io(model, parse_device_map_mode(*mode), plan,
                                               options.staged_reader ? OffloadIo::Mmap : options.offload_io,
                                               options.prefetch);
    map = std::move(planned.device_map);
    io = planned.choice;
  } else {
    map = std::get<DeviceMap>(options.device_map);
    if (has_ranks(map)) return load_pipeline_part(model, folder, options, map, base_model_prefix, dtype);
    io = resolve_offload_io(model, map, options.offload_io, options.prefetch);
  }
  const bool has_disk = std::any_of(map.begin(), map.end(), [](const auto& e) { return e.second.is_disk(); });

  LoadCheckpointOptions load;
  load.device_map = map;
  if (!options.offload_folder.empty()) load.offload_folder = options.offload_folder;
  load.dtype = dtype;
  load.offload_state_dict = options.offload_state_dict.value_or(has_disk);
  load.base_model_prefix = base_model_prefix;  // checkpoints of the bare base model (bigscience's BLOOM, "gpt2")
  load.on_progress = options.on_progress;
  const LoadCheckpointResult loaded = load_checkpoint_in_model(model, folder, load);
  const std::vector<std::string> missing = truly_missing(model, loaded.missing_keys);
  if (!missing.empty()) {
    std::string names;
    for (std::size_t i = 0; i < missing.size() && i < 8; ++i) names += (i ? ", " : "") + missing[i];
    throw Error("the checkpoint lacks " + std::to_string(missing.size()) + " tensor(s) " + model.type_name() +
                    " needs: " + names + (missing.size() > 8 ? ", ..." : ""),
                folder.string(), "Are config.json and the weights from the same model?");
  }

  DispatchOptions dispatch;
  if (load.offload_folder) dispatch.offload_dir = load.offload_folder;
  if (has_disk) dispatch.offload_index = loaded.offload_index;
  dispatch.skip_keys = {"past_key_values"};  // transformers' _skip_keys_device_placement
  dispatch.prefetch = options.prefetch;
  dispatch.prefetcher = options.prefetcher;
  dispatch.offload_io = io.io;
  dispatch.staging_bytes = io.staging_bytes;
  dispatch.staged_reader = options.staged_reader;
  // An offloaded expert's three projections are read together when (and only when) a token routes to it.
  if (info.experts.num_experts > 0) dispatch.preload_module_classes = {info.experts.expert_class};
  dispatch.expert_cache = expert_cache_for(model, map, options, dtype, io.staging_bytes);
  dispatch_model(model, map, dispatch);
  if (has_disk && info.experts.num_experts > 0) set_expert_guessing(model, true, options.guess_experts);
  model.set_hf_device_map(std::move(map));
  return options.staged_reader && has_disk ? OffloadIo::Direct : io.io;
}

// A GGUF file: config and HF-named tensors from gguf_model.h, loaded resident on cpu; a device map other than cpu
// is then planned over the loaded model and dispatched (cpu and disk parts offloaded from its state dict).
std::shared_ptr<CausalLM> from_gguf(const std::filesystem::path& path, const FromPretrainedOptions& options) {
  const io::GgufFile file = io::GgufFile::open(path);
  const ConfigJson config = gguf_config(file);
  const DType dtype = options.dtype.value_or(gguf_default_dtype(file));
  std::shared_ptr<CausalLM> model;
  {
    auto guard = nn::init_empty_weights();
    model = AutoModelForCausalLM::from_config(config, dtype);
  }
  // Quantized tensors stay as they are, unless a dtype (dequantize) or another quantization is asked for.
  if (options.quantize) quantize_weights(*model, *options.quantize);
  else if (!options.dtype) use_gguf_storage_dtypes(*model, file);
  detail::ResidentLoader loader(*model);
  for (const auto& [name, t] : gguf_state_dict(file, config)) loader.place(name, t, path.string());
  loader.finish(path.string(), "is it a complete text model?");
  if (is_resident_cpu_map(options.device_map)) {
    model->set_hf_device_map(DeviceMap{{"", Device::cpu()}});
    return model;
  }
  DeviceMap map;
  OffloadIoChoice io;
  if (const auto* mode = std::get_if<std::string>(&options.device_map)) {
    OffloadPlan planned = plan_with_offload_io(*model, parse_device_map_mode(*mode),
                                               planning_options(*model, options, std::nullopt),
                                               options.staged_reader ? OffloadIo::Mmap : options.offload_io,
                                               options.prefetch);
    map = std::move(planned.device_map);
    io = planned.choice;
  } else {
    map = std::get<DeviceMap>(options.device_map);
    io = resolve_offload_io(*model, map, options.offload_io, options.prefetch);
  }
  const bool has_disk = std::any_of(map.begin(), map.end(), [](const auto& e) { return e.second.is_disk(); });
  DispatchOptions dispatch;
  if (has_disk) {
    // The disk part is read from the GGUF file itself: index entries pointing at each tensor's bytes. A tensor loaded
    // in another dtype than the file's (a dtype or quantize option) is not those bytes: it needs an offload folder,
    // where dispatch writes it converted, once.
    io::OffloadIndex index;
    std::vector<std::string> converted;
    const std::string file_path = std::filesystem::absolute(path).string();
    const bool tied = config.get_bool("tie_word_embeddings", false);
    const Architecture& arch = architecture_for(config);
    for (const GgufHfTensor& entry : gguf_hf_tensors(file)) {  // an expert: its slice of the stacked tensor
      const io::GgufTensorInfo& info = entry.info;
      std::vector<std::string> names{entry.hf_name};
      for (const TiedKey& t : arch.tied_keys)  // a tied head is the embedding: the same bytes of the file
        if ((t.always || tied) && entry.hf_name == t.source) names.emplace_back(t.tied);
      for (const std::string& name : names) {
        if (!map.device_for(name).value_or(Device::cpu()).is_disk()) continue;
        const Tensor slot = nn::get_module_tensor(*model, name);
        if (slot.dtype() != dtype_of_ggml(info.type)) {
          converted.push_back(name);
          continue;
        }
        index[name] = io::OffloadEntry{.dtype = slot.dtype(), .shape = info.shape(), .data_file = file_path,
                                       .data_offset = info.offset};
      }
    }
    if (!converted.empty()) {
      if (options.offload_folder.empty())
        throw Error("the plan puts " + std::to_string(converted.size()) + " tensor(s) on disk in another dtype than "
                        "the file's (" + converted.front() + ", ...), which needs an offload folder",
                    path.string(), "pass --offload-folder DIR, or drop --dtype / --quantize to read them from the file");
      dispatch.offload_dir = options.offload_folder;
    } else {
      dispatch.offload_index = std::move(index);
    }
  }
  dispatch.skip_keys = {"past_key_values"};
  dispatch.prefetch = options.prefetch;
  dispatch.prefetcher = options.prefetcher;
  // The disk part read direct (O_DIRECT from the GGUF file into the staging pool) or through the page cache.
  dispatch.offload_io = io.io;
  dispatch.staging_bytes = io.staging_bytes;
  dispatch.staged_reader = options.staged_reader;
  if (model->info().experts.num_experts > 0) dispatch.preload_module_classes = {model->info().experts.expert_class};
  dispatch.expert_cache = expert_cache_for(*model, map, options, std::nullopt, io.staging_bytes);
  dispatch_model(*model, map, dispatch);
  if (has_disk && model->info().experts.num_experts > 0) set_expert_guessing(*model, true, options.guess_experts);
  model->set_hf_device_map(std::move(map));
  // cpu-placed weights: views of the file, or copies the kernel cannot drop when RAM is short (as for folders).
  const bool direct = has_disk && (options.staged_reader || io.io == OffloadIo::Direct);
  if (!options.use_mmap.value_or(!direct)) copy_mapped_weights(*model);
  return model;
}

// The rest of from_pretrained once the skeleton exists: load resident, or plan + load + dispatch; then the cpu
// weights' storage (views or copies) and mlock.
void finish_loading(LanguageModel& model, const std::string& base_model_prefix,
                    const std::filesystem::path& folder, const io::CheckpointFiles& files,
                    const FromPretrainedOptions& options, DType dtype) {
  if (options.quantize) quantize_weights(model, *options.quantize);  // loading quantizes each weight as it arrives
  OffloadIo disk_io = OffloadIo::Mmap;
  if (is_resident_cpu_map(options.device_map)) {
    detail::load_resident_weights(model, base_model_prefix, files, options.on_progress);
    model.set_hf_device_map(DeviceMap{{"", Device::cpu()}});
  } else {
    disk_io = load_and_dispatch(model, base_model_prefix, folder, options, dtype);
  }
  // cpu-placed weights: views of the checkpoint, or copies the kernel cannot drop when RAM is short.
  if (!options.use_mmap.value_or(disk_io != OffloadIo::Direct)) copy_mapped_weights(model);
  if (options.mlock) {
    const LockReport r = lock_weights_in_ram(model);
    if (!r.error.empty()) log_warning("{}: {}", folder.string(), r.error);
  }
}

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const Architecture& a : architectures())
    if (!a.encoder_decoder) names.emplace_back(a.name);
  return names;
}

std::string resolve_architecture(const ConfigJson& config) { return std::string(architecture_for(config).name); }

DType resolve_dtype(const ConfigJson& config, std::optional<DType> requested) {
  const DType dtype = requested ? *requested : config.dtype().value_or(DType::F32);
  if (!is_floating_point(dtype))
    throw Error("cannot load weights as " + std::string(dtype_name(dtype)), config.where(),
                "Choose a floating-point dtype: f32, f16, bf16 (or an f8 type).");
  return dtype;
}

bool is_resident_cpu_map(const std::variant<std::monostate, std::string, DeviceMap>& device_map) {
  if (std::holds_alternative<std::monostate>(device_map)) return true;
  if (const auto* mode = std::get_if<std::string>(&device_map)) return *mode == "cpu";
  const DeviceMap& map = std::get<DeviceMap>(device_map);
  const std::vector<Device> devices = map.devices();
  return devices.size() == 1 && devices[0].is_cpu();
}

namespace {

// The decoder-only entry `config` names; an encoder-decoder one is refused saying which class loads it.
const Architecture& causal_architecture(const ConfigJson& config) {
  const Architecture& a = architecture_for(config);
  if (a.encoder_decoder)
    config.fail(std::string(a.name) + " is an encoder-decoder model, not a causal LM",
                "load it with AutoModelForSeq2SeqLM (the `ferry` command and ferry.AutoModelForSeq2SeqLM do)");
  return a;
}

// The registry's builder for `config`, its errors naming the architecture.
std::shared_ptr<LanguageModel> build(const Architecture& a, const ConfigJson& config, DType dtype) {
  try {
    return a.build(config, dtype);
  } catch (const Error& e) {
    throw e.with_context(std::string(a.name));
  }
}

}  // namespace

std::shared_ptr<CausalLM> AutoModelForCausalLM::from_config(const ConfigJson& config, DType dtype) {
  return std::static_pointer_cast<CausalLM>(build(causal_architecture(config), config, dtype));
}

std::shared_ptr<CausalLM> AutoModelForCausalLM::from_pretrained(const std::filesystem::path& folder,
                                                                const FromPretrainedOptions& options) {
  if (is_gguf_file(folder)) return from_gguf(folder, options);
  // Everything that can be checked without reading weights is checked first.
  const ConfigJson config = ConfigJson::read(folder);
  const DType dtype = resolve_dtype(config, options.dtype);
  causal_architecture(config);
  const io::CheckpointFiles files = io::get_checkpoint_shard_files(folder);

  std::shared_ptr<CausalLM> model;
  {
    auto guard = nn::init_empty_weights();
    model = from_config(config, dtype);
  }
  finish_loading(*model, model->info().base_model_prefix, folder, files, options, dtype);
  return model;
}

namespace {

// The encoder-decoder entry `config` names by architectures[0] or model_type, or nullptr.
const Architecture* seq2seq_architecture(const ConfigJson& config) {
  const std::optional<std::string> named = config.architecture();
  const std::string type = config.model_type();
  for (const Architecture& a : architectures())
    if (a.encoder_decoder && (a.model_type == type || (named && a.name == *named))) return &a;
  return nullptr;
}

std::string seq2seq_list() {
  std::string s;
  for (const Architecture& a : architectures())
    if (a.encoder_decoder) s += (s.empty() ? "" : ", ") + std::string(a.name) + " (" + std::string(a.model_type) + ")";
  return s;
}

}  // namespace

bool is_seq2seq_config(const ConfigJson& config) { return seq2seq_architecture(config) != nullptr; }

std::shared_ptr<Seq2SeqLM> AutoModelForSeq2SeqLM::from_config(const ConfigJson& config, DType dtype) {
  const Architecture* a = seq2seq_architecture(config);
  if (!a)
    config.fail("not an encoder-decoder model ferry implements: model_type \"" + config.model_type() + "\"",
                "AutoModelForSeq2SeqLM loads " + seq2seq_list() + "; decoder-only models load with "
                "AutoModelForCausalLM");
  return std::static_pointer_cast<Seq2SeqLM>(build(*a, config, dtype));
}

std::shared_ptr<Seq2SeqLM> AutoModelForSeq2SeqLM::from_pretrained(const std::filesystem::path& folder,
                                                                  const FromPretrainedOptions& options) {
  const ConfigJson config = ConfigJson::read(folder);
  const DType dtype = resolve_dtype(config, options.dtype);
  std::shared_ptr<Seq2SeqLM> model = [&] {
    auto guard = nn::init_empty_weights();
    return from_config(config, dtype);
  }();
  const io::CheckpointFiles files = io::get_checkpoint_shard_files(folder);
  finish_loading(*model, "", folder, files, options, dtype);
  return model;
}

std::shared_ptr<LanguageModel> language_model_from_config(const ConfigJson& config, DType dtype) {
  return build(architecture_for(config), config, dtype);
}

std::shared_ptr<LanguageModel> load_language_model(const std::filesystem::path& path,
                                                   const FromPretrainedOptions& options) {
  if (!is_gguf_file(path) && is_seq2seq_config(ConfigJson::read(path)))
    return AutoModelForSeq2SeqLM::from_pretrained(path, options);
  return AutoModelForCausalLM::from_pretrained(path, options);
}

}  // namespace ferry::models
