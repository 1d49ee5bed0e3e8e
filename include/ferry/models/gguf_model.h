// GGUF files (llama.cpp's format, io/gguf.h) as the same ferry modules a Hugging Face folder gives: the config
// from the GGUF metadata and llama.cpp's tensor names mapped back to HF's. Every tensor stays a view of the file:
// llama.cpp's converter interleaves each head's q/k rows, and instead of undoing that (as transformers'
// load_gguf_checkpoint does, `from_pretrained(..., gguf_file=...)`), the config asks attention to rotate adjacent
// pairs (LlamaConfig::rope_layout) — the same result. So a disk-placed part is read straight from the GGUF file
// (offload index entries pointing into it), with no offload folder.
//
//   auto model = AutoModelForCausalLM::from_pretrained("SmolLM2-135M.Q8_0.gguf");   // detected by the magic
//
// Architectures: llama (Llama, Mistral and Mixtral as llama.cpp writes them), qwen2, qwen3, qwen2moe and qwen3moe.
// A mixture of experts' stacked expert tensors (ffn_{gate,up,down}_exps, [E, out, in]) become one module per expert,
// each a view of its slice of the file, so an expert placed on disk is read alone, as one sequential read. Quantized
// tensors stay quantized (the file's blocks, computed on by ops::linear's quantized kernels) unless a dtype is asked
// for, which dequantizes them exactly. What ferry cannot load faithfully is refused by name (llama 3 rope factors, YaRN
// scaling, partial rotary dims) rather than computed wrongly.
#pragma once

#include <filesystem>
#include <map>
#include <utility>
#include <vector>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/core/dtype.h"
#include "ferry/io/gguf.h"
#include "ferry/io/state_dict.h"
#include "ferry/models/architectures.h"
#include "ferry/models/config.h"
#include "ferry/nn/module.h"

namespace ferry::models {

/// Whether `path` is a regular file that starts with the GGUF magic.
bool is_gguf_file(const std::filesystem::path& path);

/// The config of the model at `path`: a GGUF file's metadata (gguf_config) or a folder's config.json.
ConfigJson read_model_config(const std::filesystem::path& path);

/// The config.json the metadata describes (architectures, sizes, heads, eps, rope, tie_word_embeddings, biases).
/// Throws ferry::Error naming the file and key for an unsupported architecture or a missing / unsupported setting.
ConfigJson gguf_config(const io::GgufFile& file);

/// The registry's entry for the file's general.architecture (its tensor names: architectures.h's hf_tensor_name /
/// gguf_tensor_name). Throws ferry::Error naming the key for an architecture ferry does not read.
const GgufArchitecture& gguf_architecture(const io::GgufFile& file);

/// The dtype a GGUF's weights load as by default: the type of its first attention projection when that is f32, f16
/// or bf16, else f32 (quantized weights dequantize exactly into f32).
DType gguf_default_dtype(const io::GgufFile& file);

/// The tokenizer a GGUF file's `tokenizer.ggml.*` metadata describes, as a tokenizer.json document for
/// text::Tokenizer::from_json (so one tokenizer implementation serves folders and GGUF files). Supported: the "gpt2"
/// model (byte-level BPE: tokens, merges, token types) with llama.cpp's pre-tokenizers gpt2, smollm, llama-bpe /
/// llama3, qwen2 (and the other names that share their regexes), and the "llama" model (SentencePiece BPE: tokens,
/// scores, token types, add_space_prefix; as a BPE with byte fallback whose merges are ranked by score,
/// src/models/gguf_tokenizer.cc); control and user-defined tokens become added tokens; add_bos_token /
/// add_eos_token become the post-processor. Throws ferry::Error naming the key for a model or pre-tokenizer ferry
/// does not reproduce, instead of tokenizing differently.
nlohmann::json gguf_tokenizer_json(const io::GgufFile& file);

/// Every tensor of `file` under its HF name, as stored: zero-copy views (quantized ones as quantized DTypes), Llama's
/// q/k rows in llama.cpp's interleaved order (gguf_config sets rope_interleaved, so attention pairs them up that
/// way). Throws for tensors without an HF name and types ferry has no DType for (naming them). Loading casts each
/// to its skeleton slot's dtype.
io::StateDict gguf_state_dict(const io::GgufFile& file, const ConfigJson& config);

/// A tensor of a GGUF file under its HF name: a whole tensor of the file, or one expert's slice of a stacked
/// ffn_{gate,up,down}_exps (io::GgufTensorInfo::slice: its own offset, bytes and shape [out, in]).
struct GgufHfTensor {
  std::string hf_name;
  io::GgufTensorInfo info;
};
/// Every tensor of `file` under its HF name, in file order, stacked experts as one entry per expert. Throws
/// ferry::Error listing the tensors with no HF counterpart.
std::vector<GgufHfTensor> gguf_hf_tensors(const io::GgufFile& file);
/// The `tokenizer.ggml.*` metadata for a Hugging Face folder's tokenizer.json (the inverse of gguf_tokenizer_json):
/// a byte-level BPE with a pre-tokenizer llama.cpp names (gpt2, smollm, llama-bpe, qwen2) becomes a "gpt2"
/// vocabulary; a BPE with byte fallback and ▁ for spaces (Llama 1/2, Mistral, TinyLlama) a "llama" SentencePiece
/// one, scored by merge rank. Anything else gives no metadata and a description saying why (the GGUF then runs on
/// token ids only).
struct GgufTokenizerMetadata {
  std::vector<std::pair<std::string, io::GgufValue>> metadata;
  std::string description;  ///< "gpt2 (smollm)", "llama (SentencePiece)", or why there is none
};
GgufTokenizerMetadata gguf_tokenizer_metadata(const std::filesystem::path& folder, const ConfigJson& config);

/// `ferry quantize`: the model at `source` (a Hugging Face folder or a GGUF file of llama, mistral, qwen2, qwen3 or
/// their MoE kin) as a GGUF file llama.cpp loads — config as <arch>.* metadata, tensors under llama.cpp's names with
/// q/k rows in its order, a tied head left out, the tokenizer copied (GGUF) or converted (gguf_tokenizer_metadata) —
/// its weights in `type`: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q6_k, or the mixes q4_k_m / q5_k_m (q4_k /
/// q5_k, with output.weight and the attn_v / ffn_down of llama.cpp's use_more_bits layers in q6_k). Norms stay f32;
/// rows that are not whole blocks fall back to q8_0 or f16. One tensor is quantized at a time while the file is written
/// (atomically). Quantizers: core/quant.h. llama.cpp: convert_hf_to_gguf.py + llama-quantize.
struct GgufExportOptions {
  std::string type = "q8_0";
  std::string name;  ///< general.name (default: the source's file or folder name)
  /// tokenizer.chat_template to write, as llama.cpp's converter does (the `ferry quantize` command passes the
  /// folder's, text::load_chat_template). Empty: none, or — from a GGUF source — the source's, copied as it is.
  std::string chat_template;
};
struct GgufExportReport {
  std::map<std::string, int64_t> tensors_per_type;  ///< "q4_k" -> count
  uint64_t bytes = 0;                               ///< tensor bytes written
  std::string tokenizer;                            ///< what was written for the vocabulary
};
GgufExportReport export_gguf(const std::filesystem::path& source, const std::filesystem::path& out,
                             const GgufExportOptions& options = {});

/// Gives each parameter of `skeleton` (meta, from gguf_config) whose GGUF tensor is quantized that tensor's
/// quantized dtype, so loading keeps the blocks as they are and planning counts their bytes. Returns how many.
std::size_t use_gguf_storage_dtypes(nn::Module& skeleton, const io::GgufFile& file);

}  // namespace ferry::models
