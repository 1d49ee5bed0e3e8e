// ferry.AutoModelForCausalLM / ferry.AutoModelForSeq2SeqLM (from_pretrained, from_config) and the model object they
// return: model(input_ids) -> logits as numpy, hf_device_map, config. generate() is in generate.cc.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <filesystem>
#include "bindings.h"
#include "ferry/big_modeling/max_memory.h"
#include "ferry/core/error.h"
#include "ferry/models/auto_model.h"
#include "ferry/models/gguf_model.h"
#include "ferry/models/moe.h"
#include "ferry/models/pipeline.h"
#include "ferry/text/generate.h"
#include "ferry/text/pretrained.h"
#include "model.h"
#include "tokenizer_loading.h"

namespace ferry::python {
namespace {

using namespace nb::literals;
namespace fs = std::filesystem;

struct LoadArgs {
  nb::object device_map, max_memory, offload_folder, dtype, quantize;
  std::optional<std::vector<std::string>> no_split_module_classes;
  nb::object prefetch;  // "auto" or a number of modules
  std::string offload_io = "auto";
  bool plan_by_expert = true;
  nb::object expert_cache;  // "auto", a size ("2GiB") or bytes (0: none)
  bool guess_experts = false;
  int micro_batches = 0;  // a pipeline over ranks: micro-batches per forward over several sequences (0: one per rank)
};

// expert_cache: "auto" / None (nullopt: the plan's free cpu budget), a size string or a number of bytes >= 0.
std::optional<int64_t> expert_cache_arg(nb::handle value) {
  if (value.is_none()) return std::nullopt;
  if (nb::isinstance<nb::str>(value)) {
    const std::string s = nb::cast<std::string>(value);
    if (s == "auto") return std::nullopt;
    try {
      return convert_file_size_to_int(s);
    } catch (const Error& e) {
      throw e.with_context("expert_cache");
    }
  }
  if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
    const long long n = nb::cast<long long>(value);
    if (n >= 0) return n;
  }
  throw Error("expert_cache must be \"auto\", a size or a number of bytes >= 0, got " +
                  nb::cast<std::string>(nb::repr(value)),
              "expert_cache", "e.g. expert_cache=\"2GiB\", expert_cache=0 (no cache)");
}

// "auto" (kPrefetchAuto) or a depth >= 0.
int prefetch_arg(nb::handle value) {
  if (nb::isinstance<nb::str>(value)) return parse_prefetch(nb::cast<std::string>(value), "prefetch");
  if (nb::isinstance<nb::int_>(value) && !nb::isinstance<nb::bool_>(value)) {
    const long long n = nb::cast<long long>(value);
    if (n >= 0 && n <= 1024) return static_cast<int>(n);
  }
  throw Error("prefetch must be \"auto\" or a number of modules (0: synchronous reads), got " +
                  nb::cast<std::string>(nb::repr(value)),
              "prefetch", "e.g. prefetch=\"auto\", prefetch=2, prefetch=0");
}

// from_pretrained: text::from_pretrained — the loader the CLI and the server use (model, tokenizer, chat template, EOS
// ids); the map hf_device_map shows is the one the model was dispatched with.
Model load(const fs::path& path, bool seq2seq, const LoadArgs& a) {
  models::FromPretrainedOptions o;
  o.max_memory = max_memory_arg(a.max_memory);
  o.dtype = dtype_arg(a.dtype);
  o.quantize = dtype_arg(a.quantize);
  if (!a.offload_folder.is_none()) o.offload_folder = path_arg(a.offload_folder);
  if (a.no_split_module_classes) o.no_split_module_classes = *a.no_split_module_classes;
  o.prefetch = prefetch_arg(a.prefetch);
  o.offload_io = parse_offload_io(a.offload_io);
  o.plan_by_expert = a.plan_by_expert;
  o.expert_cache_bytes = expert_cache_arg(a.expert_cache);
  o.expert_cache = std::make_shared<ExpertCache>();
  o.guess_experts = a.guess_experts;
  o.pipeline_micro_batches = a.micro_batches;

  Model out;
  out.expert_cache = o.expert_cache;
  out.name_or_path = path.string();
  if (!fs::exists(path))
    throw Error(ErrorKind::NotFound, "model folder not found", path.string(),
                "pass a folder with config.json and the weights, or a .gguf file");
  if (!models::is_gguf_file(path)) {
    out.config = models::ConfigJson::read(path);
    const bool is_seq2seq = models::is_seq2seq_config(*out.config);
    if (is_seq2seq != seq2seq)
      throw Error(std::string(is_seq2seq ? "an encoder-decoder" : "a decoder-only") + " model cannot be loaded by " +
                      (seq2seq ? "AutoModelForSeq2SeqLM" : "AutoModelForCausalLM"),
                  path.string(), is_seq2seq ? "use ferry.AutoModelForSeq2SeqLM" : "use ferry.AutoModelForCausalLM");
  }
  if (nb::isinstance<nb::str>(a.device_map)) {
    o.device_map = nb::cast<std::string>(a.device_map);
  } else if (nb::isinstance<nb::dict>(a.device_map)) {
    o.device_map = device_map_arg(a.device_map);
  } else if (!a.device_map.is_none()) {
    throw Error(
        "device_map must be None, a mode (\"auto\", \"balanced\", \"balanced_low_0\", \"sequential\", \"fast\"), "
        "\"cpu\" or a dict",
        "device_map");
  }
  out.device_map_given = !a.device_map.is_none();

  nb::gil_scoped_release release;
  text::Pretrained p = text::from_pretrained(path, o);
  out.model = std::move(p.model);
  out.tokenizer = std::move(p.tokenizer);  // a tokenizer ferry cannot read leaves the model usable with ids
  out.chat_template = std::move(p.chat_template);
  out.eos_token_ids = std::move(p.eos_token_ids);
  return out;
}

Model from_config(nb::handle config, nb::handle dtype, bool seq2seq) {
  Model out;
  out.config = config_arg(config);
  const DType d = dtype_arg(dtype).value_or(DType::F32);
  if (seq2seq) out.model = models::AutoModelForSeq2SeqLM::from_config(*out.config, d);
  else out.model = models::AutoModelForCausalLM::from_config(*out.config, d);
  return out;
}

// One row through the model: a fresh sequence of `ids` (an encoder-decoder model encodes them) whose first forward
// takes `decoder_ids` when given (encoder-decoder models), else its own first input.
Tensor forward_row(Model& m, const std::vector<int64_t>& ids, const std::vector<int64_t>& decoder_ids, int64_t keep) {
  models::SequenceStart start = m.model->start_sequence(ids, DType::F32);
  const std::vector<int64_t>& input = decoder_ids.empty() ? start.input : decoder_ids;
  const models::StepRow row{start.state, static_cast<int64_t>(input.size())};
  return m.model->forward_step(Tensor::from_vector(input, {row.tokens}), {&row, 1}, keep);
}

nb::object call(Model& m, nb::handle input_ids, nb::handle decoder_input_ids, int64_t logits_to_keep) {
  bool two_d = false;
  const auto rows = token_rows_arg(input_ids, &two_d);
  std::vector<std::vector<int64_t>> decoder_rows(rows.size());  // empty: each sequence's own first input
  if (m.info().is_encoder_decoder && !decoder_input_ids.is_none()) {
    decoder_rows = token_rows_arg(decoder_input_ids, nullptr);
    if (decoder_rows.size() != rows.size())
      throw Error("decoder_input_ids has " + std::to_string(decoder_rows.size()) + " rows, input_ids " +
                  std::to_string(rows.size()), "decoder_input_ids");
  }
  std::vector<Tensor> logits;
  {
    nb::gil_scoped_release release;
    std::lock_guard lock(*m.mutex);
    for (std::size_t r = 0; r < rows.size(); ++r)
      logits.push_back(forward_row(m, rows[r], decoder_rows[r], logits_to_keep));
  }
  if (logits.size() == 1) {
    const auto& s = logits.front().shape();
    std::vector<std::size_t> shape{static_cast<std::size_t>(s[0]), static_cast<std::size_t>(s[1])};
    if (two_d) shape.insert(shape.begin(), 1);
    return tensor_to_numpy(logits.front(), shape);  // zero-copy
  }
  nb::list arrays;
  for (Tensor& t : logits) arrays.append(tensor_to_numpy(std::move(t)));
  return nb::module_::import_("numpy").attr("stack")(arrays);
}

constexpr const char* kFromPretrainedDoc =
    "Loads a Hugging Face model folder (config.json + safetensors or pytorch_model.bin, sharded or not; or a GGUF "
    "file for causal LMs), as transformers' from_pretrained does, with Accelerate's big-model keywords:\n\n"
    "device_map: None (all in RAM), \"auto\", \"balanced\", \"balanced_low_0\", \"sequential\", \"fast\", \"cpu\", or "
    "a dict "
    "{module: GPU index | \"cpu\" | \"disk\"}.\n"
    "max_memory: {0: \"20GiB\", \"cpu\": \"8GiB\"}; None = what the devices have free.\n"
    "offload_folder: where disk-offloaded weights are written when they must be rewritten.\n"
    "dtype: \"bfloat16\", \"float16\", \"float32\" (or torch dtypes); None = config.json's.\n"
    "no_split_module_classes: None = the architecture's block class.\n"
    "prefetch: offloaded modules read this many modules ahead (0 = Accelerate's synchronous loading); \"auto\" "
    "(default) measures 2 and 0 on the first forwards and keeps the faster.\n"
    "offload_io: \"auto\", \"direct\" (O_DIRECT reads) or \"mmap\".\n"
    "quantize: \"q8_0\", \"q4_k\", ... to quantize Linear/Embedding weights while loading.\n"
    "plan_by_expert: mixtures of experts: the device_map modes plan each expert as a unit after the dense parts "
    "(False: Accelerate's plan by decoder layer).\n"
    "expert_cache: mixtures of experts with experts on disk: RAM for an LRU cache of the experts read, \"auto\" "
    "(default: what the plan leaves of the cpu budget), a size (\"2GiB\") or 0 (none).\n"
    "guess_experts: mixtures of experts with experts on disk: read the experts the next layer's router picks for "
    "this layer's input a layer ahead (default False: only routed experts; the guesses are counted either way).\n"
    "micro_batches: a pipeline over MPI ranks (device_map naming \"rank1:cpu\", ...): a forward over several "
    "sequences is split into this many micro-batches in flight (default 0: one per rank).\n"
    "Raises ferry.NotFoundError, ferry.OutOfMemoryError (budget too small) or ferry.InvalidValueError.";

template <bool Seq2Seq>
void bind_auto_class(nb::module_& m, const char* name, const char* doc) {
  struct Tag {};
  nb::class_<Tag>(m, name, doc)
      .def_static(
          "from_pretrained",
          [](nb::handle path, nb::object device_map, nb::object max_memory, nb::object offload_folder, nb::object dtype,
             std::optional<std::vector<std::string>> no_split, nb::object prefetch, std::string offload_io,
             nb::object quantize, nb::object torch_dtype, bool plan_by_expert, nb::object expert_cache,
             bool guess_experts, int micro_batches) {
            LoadArgs a{device_map,     max_memory,          offload_folder, dtype.is_none() ? torch_dtype : dtype,
                       quantize,       std::move(no_split), prefetch,       std::move(offload_io),
                       plan_by_expert, expert_cache,        guess_experts,  micro_batches};
            return load(path_arg(path), Seq2Seq, a);
          },
          "pretrained_model_name_or_path"_a, "device_map"_a = nb::none(), "max_memory"_a = nb::none(),
          "offload_folder"_a = nb::none(), "dtype"_a = nb::none(), "no_split_module_classes"_a = nb::none(),
          "prefetch"_a = "auto", "offload_io"_a = "auto", "quantize"_a = nb::none(), "torch_dtype"_a = nb::none(),
          "plan_by_expert"_a = true, "expert_cache"_a = "auto", "guess_experts"_a = false, "micro_batches"_a = 0,
          kFromPretrainedDoc)
      .def_static(
          "from_config", [](nb::handle config, nb::handle dtype) { return from_config(config, dtype, Seq2Seq); },
          "config"_a, "dtype"_a = nb::none(),
          "Builds the architecture config names (a path, dict or JSON text): random weights, or no weights "
          "at all (meta) inside `with ferry.init_empty_weights():`.");
}

}  // namespace

void bind_models(nb::module_& m) {
  nb::class_<Model>(m, "PreTrainedModel",
                    "A model loaded by AutoModelForCausalLM / AutoModelForSeq2SeqLM. Calls release the GIL; calls on "
                    "one model from several threads run one at a time.")
      .def(
          "follow_pipeline",
          [](Model& m) {
            nb::gil_scoped_release release;
            std::lock_guard lock(*m.mutex);
            models::follow_pipeline(*m.model);
          },
          "On a rank other than 0 of a pipeline (a device map over ranks, under mpirun): repeats rank 0's forwards "
          "with this rank's blocks until rank 0 calls end_pipeline() (or exits).")
      .def(
          "end_pipeline",
          [](Model& m) {
            nb::gil_scoped_release release;
            std::lock_guard lock(*m.mutex);
            models::end_pipeline(*m.model);
          },
          "On rank 0 of a pipeline: the other ranks return from follow_pipeline(). A no-op otherwise.")
      .def("__call__", &call, "input_ids"_a, "decoder_input_ids"_a = nb::none(), "logits_to_keep"_a = 0,
           "The logits of input_ids ([T] or [B, T]; lists, numpy or CPU torch tensors) as a float32 numpy array "
           "[T, V] or [B, T, V] that shares ferry's memory (torch.from_dlpack(logits) shares it too). "
           "Encoder-decoder models return the decoder's logits (decoder_input_ids default: the start token).")
      .def_prop_ro(
          "hf_device_map",
          [](const Model& m) -> nb::object {
            const std::optional<DeviceMap> map = m.hf_device_map();
            if (!map) return nb::none();
            return device_map_dict(*map);
          },
          "The device map the model was dispatched with ({module: GPU index | \"cpu\" | \"disk\"}), or None when "
          "from_pretrained had no device_map.")
      .def_prop_ro(
          "config",
          [](const Model& m) -> nb::object {
            if (!m.config) return nb::none();
            return json_to_python(m.config->json().dump());
          },
          "config.json as a dict (None for GGUF files).")
      .def_prop_ro(
          "tokenizer",
          [](const Model& m) -> nb::object {
            if (!m.tokenizer) return nb::none();
            return nb::cast(TokenizerObject{*m.tokenizer, m.chat_template});
          },
          "The folder's tokenizer (tokenizer.json), or None.")
      .def_prop_ro("is_encoder_decoder", [](const Model& m) { return m.info().is_encoder_decoder; })
      .def_prop_ro(
          "architecture", [](const Model& m) { return m.info().architecture; },
          "The transformers class: \"LlamaForCausalLM\", \"T5ForConditionalGeneration\", ...")
      .def_prop_ro(
          "eos_token_id", [](const Model& m) { return m.eos_token_ids; },
          "The ids that end generation (generation_config.json, else config.json).")
      .def_prop_ro("name_or_path", [](const Model& m) { return m.name_or_path; })
      .def_prop_ro(
          "experts",
          [](const Model& m) -> nb::object {
            const models::ExpertsInfo& e = m.info().experts;
            if (e.num_experts == 0) return nb::none();
            nb::dict d;
            d["num_experts"] = e.num_experts;
            d["num_experts_per_tok"] = e.experts_per_token;
            d["expert_class"] = e.expert_class;
            return d;
          },
          "A mixture of experts' shape ({\"num_experts\", \"num_experts_per_tok\", \"expert_class\"}), or None.")
      .def_prop_ro(
          "expert_cache_stats",
          [](const Model& m) -> nb::object {
            if (!m.expert_cache || !m.expert_cache->map) return nb::none();  // no expert on disk
            const io::WeightsCacheStats s = m.expert_cache->stats();
            nb::dict d;
            d["hits"] = s.hits;
            d["misses"] = s.misses;
            d["evictions"] = s.evictions;
            d["kept"] = s.kept;
            d["bytes_missed"] = s.bytes_missed;
            d["bytes"] = s.bytes;
            d["capacity"] = s.capacity;
            const models::ExpertUse u = models::expert_use(*m.model);
            d["routed"] = u.calls;
            d["guessed"] = u.guessed;
            d["guessed_routed"] = u.guessed_routed;
            return d;
          },
          "With experts on disk: the expert cache's counts so far ({\"hits\", \"misses\", \"evictions\", "
          "\"kept\" (misses kept in the buffer a direct read filled, no copy), \"bytes_missed\" (read from disk), "
          "\"bytes\" (held), \"capacity\", \"routed\" (experts run), "
          "\"guessed\" (read a layer ahead by guess_experts), \"guessed_routed\" (of those, routed)}); else None.")
      .def(
          "num_parameters",
          [](const Model& m) {
            int64_t n = 0;
            for (const auto& [name, t] : m.module().state_dict()) n += t.numel();
            return n;
          },
          "Elements in the model's state dict (tied tensors counted once per name).")
      .def("__repr__", [](const Model& m) {
        return "<ferry " + m.info().architecture +
               (m.name_or_path.empty() ? std::string() : " from " + m.name_or_path) + ">";
      });

  bind_auto_class<false>(m, "AutoModelForCausalLM",
                         "transformers' AutoModelForCausalLM: Llama, Mistral, Qwen2, GPT-2, GPT-J (folders or GGUF).");
  bind_auto_class<true>(m, "AutoModelForSeq2SeqLM",
                        "transformers' AutoModelForSeq2SeqLM: T5, T0pp, Flan-T5, MT5, UMT5.");
}

}  // namespace ferry::python
