// AutoModelForCausalLM: from a Hugging Face model folder (config.json + safetensors or pytorch_model.bin, sharded
// or not) to a running model, the way transformers' AutoModelForCausalLM.from_pretrained does — with no conversion
// step. The architecture is chosen from config.json (architectures[0], else model_type); the skeleton is built
// under init_empty_weights (no bytes), then the checkpoint's tensors go straight to where they will live.
//
// Architectures: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM (llama.h), GPT2LMHeadModel (gpt2.h),
// GPTJForCausalLM (gptj.h), GPTNeoXForCausalLM (gpt_neox.h), OPTForCausalLM (opt.h), Phi3ForCausalLM (phi3.h),
// BloomForCausalLM (bloom.h).
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ferry/big_modeling/device_map.h"       // DeviceMap
#include "ferry/big_modeling/dispatch.h"         // ExpertCache
#include "ferry/big_modeling/load_checkpoint.h"  // LoadProgressCallback
#include "ferry/big_modeling/max_memory.h"       // MaxMemory
#include "ferry/big_modeling/prefetch.h"         // kPrefetchAuto, Prefetcher
#include "ferry/core/dtype.h"
#include "ferry/core/process_group.h"
#include "ferry/io/staged_reader.h"  // OffloadIo, StagedReader
#include "ferry/models/causal_lm.h"
#include "ferry/models/config.h"
#include "ferry/models/seq2seq_lm.h"

namespace ferry::models {

/// from_pretrained's keywords, with transformers' / Accelerate's names and defaults.
struct FromPretrainedOptions {
  /// Where each module runs. Unset, "cpu", or a map sending everything to cpu: loaded resident on the cpu.
  /// A mode ("auto", "balanced", "balanced_low_0", "sequential") or any other DeviceMap: planned
  /// (plan_device_map), loaded into the plan (load_checkpoint_in_model) and dispatched (dispatch_model), as
  /// Accelerate's load_checkpoint_and_dispatch does. Hand-written maps should not nest one entry inside another
  /// or split tied parameters between devices (dispatch does not support either yet).
  std::variant<std::monostate, std::string, DeviceMap> device_map;
  /// For a device map over ranks ("rank1:cpu", big_modeling/pipeline.h): the ranks' process group (nullptr:
  /// world_process_group()). Each rank loads only its entries; rank 0 leads the pipeline (models/pipeline.h), the
  /// others call follow_pipeline.
  std::shared_ptr<ProcessGroup> process_group;
  /// Rank 0 of a pipeline: how many micro-batches a forward over several sequences (batched generation, ferry serve)
  /// is split into, so that the ranks compute at the same time (0: one per rank). PipelineLeader
  int pipeline_micro_batches = 0;
  /// Budget per device for the modes; nullopt = what the devices have free.
  std::optional<MaxMemory> max_memory;
  /// The dtype float weights are loaded as; nullopt = config.json's dtype/torch_dtype, else f32. For a GGUF file,
  /// a dtype dequantizes its quantized tensors; nullopt keeps them quantized.
  std::optional<DType> dtype;
  /// Quantize every Linear and Embedding weight to this block-quantized dtype (q8_0, q4_0, q4_1, q5_0, q5_1, q4_k,
  /// q5_k, q6_k) as it is loaded (big_modeling/quantize.h); planning counts the quantized bytes. Weights whose rows
  /// are not whole blocks stay in `dtype`. transformers: quantization_config; llama.cpp: llama-quantize.
  std::optional<DType> quantize;
  /// Where disk-offloaded weights go when a plan uses "disk" and they must be rewritten (.bin checkpoints, dtype
  /// changes); safetensors weights of the right dtype are read from the checkpoint itself. Empty = none.
  std::filesystem::path offload_folder;
  /// Accelerate: offload_state_dict — stage cpu-bound weights on disk while loading, to bound peak RAM.
  /// nullopt = on when the plan uses disk (transformers' default).
  std::optional<bool> offload_state_dict;
  /// Modules a plan never splits across devices; empty = the architecture's block class (LlamaDecoderLayer, ...).
  std::vector<std::string> no_split_module_classes;
  /// Beyond HF, mixtures of experts: the modes plan each expert as a unit, dense parts first
  /// (PlanOptions::expert_module_classes); false = Accelerate's layer-granular plan. Either way an offloaded expert
  /// is read only when a token routes to it.
  bool plan_by_expert = true;
  /// Beyond HF, mixtures of experts with experts on disk: the bytes of RAM for an LRU cache of the experts read
  /// (DispatchOptions::expert_cache), so that an expert routed to again soon is not read again. nullopt: what the
  /// plan leaves free of the cpu budget, at most the experts on disk (default_expert_cache_bytes); 0: none.
  std::optional<int64_t> expert_cache_bytes;
  /// Set: from_pretrained fills it (classes, capacity, the cache itself) so that the caller can read its stats().
  std::shared_ptr<ExpertCache> expert_cache;
  /// Beyond HF, mixtures of experts with experts on disk: each sparse block guesses the next one's experts with that
  /// block's router (SparseMoeBlock::set_next), and how often the guesses are routed is counted (expert_use); true
  /// also reads the guesses ahead, after what runs. Off by default: on random weights (a third of the routed experts
  /// guessed) the reads of wrong guesses cost more than the right ones save (docs/benchmarks.md); turn it on where
  /// the counts show that the guesses are mostly routed.
  bool guess_experts = false;
  /// Called after each tensor is loaded (for progress bars); empty = none.
  LoadProgressCallback on_progress;
  /// Beyond HF: offloaded modules read this many modules ahead while one computes (DispatchOptions::prefetch);
  /// kPrefetchAuto (the default) = measured per run; 0 = each module's weights are read when it starts, as
  /// Accelerate does.
  int prefetch = kPrefetchAuto;
  /// Reads ahead through this prefetcher when set (the caller keeps its status()); see DispatchOptions.
  std::shared_ptr<Prefetcher> prefetcher;
  /// Beyond HF: how disk-placed weights are read (DispatchOptions::offload_io): auto, direct (O_DIRECT into a
  /// staging pool) or mmap (page cache).
  OffloadIo offload_io = OffloadIo::Auto;
  /// Direct reads go through this reader when set (the caller keeps its statistics); see DispatchOptions.
  std::shared_ptr<io::StagedReader> staged_reader;
  /// Beyond HF (llama.cpp's --mmap / --no-mmap): true keeps cpu-placed weights as zero-copy views of the
  /// checkpoint; false copies them into anonymous memory (copy_mapped_weights), which the kernel's reclaim cannot
  /// drop and re-read. nullopt: copy when the disk part is read direct (RAM is short), else keep the views.
  std::optional<bool> use_mmap;
  /// Beyond HF (llama.cpp's --mlock): lock the cpu-placed weights in RAM (lock_weights_in_ram); a refused lock is
  /// logged as a warning saying what to do.
  bool mlock = false;
};

class AutoModelForCausalLM {
 public:
  /// Loads the model in `folder`.
  ///   auto model = AutoModelForCausalLM::from_pretrained("TinyLlama-1.1B", {.dtype = DType::BF16});
  ///   auto cache = model->make_cache();
  ///   Tensor logits = model->logits(prompt_ids, cache);
  ///   auto big = AutoModelForCausalLM::from_pretrained("Llama-3-8B", {.device_map = std::string("auto"),
  ///       .max_memory = MaxMemory::from_flag("0=4GiB,cpu=8GiB"), .offload_folder = "offload"});
  /// Throws ferry::Error before reading any weight for a bad config, an unknown architecture or missing shards; while
  /// loading, for a tensor whose shape disagrees with config.json (naming tensor and file); after, listing every
  /// tensor the checkpoint lacks (tied parameters count as loaded through their partner). Unexpected checkpoint
  /// tensors are a warning (ferry::log_warning); resident loads also skip silently the buffers old checkpoints
  /// carry (GPT-2's attn.bias, rotary inv_freq) and accept checkpoints of the bare base model ("h.0..." for
  /// "transformer.h.0..."). Dispatched models get "past_key_values" as a skip_key, so the KV cache never moves.
  /// HF: AutoModelForCausalLM.from_pretrained(folder, device_map=..., max_memory=..., dtype=..., ...)
  static std::shared_ptr<CausalLM> from_pretrained(const std::filesystem::path& folder,
                                                   const FromPretrainedOptions& options = {});

  /// Builds the architecture `config` names, weights of `dtype`: random (nn/init.h) normally, on meta inside
  /// init_empty_weights — the skeleton planners need:
  ///   std::shared_ptr<CausalLM> skeleton;
  ///   { auto guard = nn::init_empty_weights(); skeleton = AutoModelForCausalLM::from_config(config, DType::BF16); }
  /// HF: AutoModelForCausalLM.from_config
  static std::shared_ptr<CausalLM> from_config(const ConfigJson& config, DType dtype = DType::F32);
};

/// transformers' AutoModelForSeq2SeqLM: encoder-decoder models — T5ForConditionalGeneration (T5 v1.0, v1.1, T0pp,
/// Flan-T5), MT5ForConditionalGeneration and UMT5ForConditionalGeneration (t5.h). The same options, plans, offload
/// and prefetch as AutoModelForCausalLM; no_split_module_classes defaults to T5Block.
///   auto t0 = AutoModelForSeq2SeqLM::from_pretrained("T0pp", {.device_map = std::string("auto"), .dtype = DType::F16});
///   Tensor enc = t0->encode(input_ids);
class AutoModelForSeq2SeqLM {
 public:
  static std::shared_ptr<Seq2SeqLM> from_pretrained(const std::filesystem::path& folder,
                                                   const FromPretrainedOptions& options = {});
  static std::shared_ptr<Seq2SeqLM> from_config(const ConfigJson& config, DType dtype = DType::F32);
};

/// The model at `path` — a Hugging Face folder of either kind or a GGUF file — with from_pretrained's options:
/// AutoModelForSeq2SeqLM for an encoder-decoder config, AutoModelForCausalLM otherwise. What the CLI, the Python
/// package and the server load through (text/pretrained.h adds the tokenizer, chat template and EOS ids).
std::shared_ptr<LanguageModel> load_language_model(const std::filesystem::path& path,
                                                   const FromPretrainedOptions& options = {});
/// from_config of the kind `config` names (init_empty_weights applies as for the typed classes).
std::shared_ptr<LanguageModel> language_model_from_config(const ConfigJson& config, DType dtype = DType::F32);

/// True when config.json names an encoder-decoder model ferry implements (model_type t5 or mt5, or a
/// *ForConditionalGeneration architecture of them).
bool is_seq2seq_config(const ConfigJson& config);

/// The class to build for `config` (architectures.h's architecture_for: architectures[0] when ferry implements it,
/// else model_type's entry). Throws ferry::Error naming both keys and listing what ferry supports.
std::string resolve_architecture(const ConfigJson& config);

/// The decoder-only classes ferry implements, in the registry's order.
std::vector<std::string> supported_architectures();

/// The dtype from_pretrained loads in: `requested`, else config.json's, else f32.
DType resolve_dtype(const ConfigJson& config, std::optional<DType> requested);

/// True when `device_map` means "everything on the cpu" (unset, "cpu", or a map whose only device is cpu).
bool is_resident_cpu_map(const std::variant<std::monostate, std::string, DeviceMap>& device_map);

}  // namespace ferry::models
