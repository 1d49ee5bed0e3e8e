// model.generate(...): text::generate (one prompt) or text::BatchGenerator (several: one forward per step for all
// of them) with transformers' keyword names. The GIL is released while the model runs; it is taken back once per
// token to call the streamer and to check for Ctrl-C (PyErr_CheckSignals), so a KeyboardInterrupt stops a long
// generation at the next token and is raised from generate().
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <random>
#include <variant>

#include "bindings.h"
#include "ferry/core/error.h"
#include "ferry/text/batch_generate.h"
#include "ferry/text/generate.h"
#include "model.h"

namespace ferry::python {
namespace {

using namespace nb::literals;
using text::TokenId;

struct Settings {
  text::GenerateOptions options;
  nb::object streamer;
  Model* assistant = nullptr;  // the draft model (assistant_model), locked with the model
};

// What generate() returns with return_dict=True.
struct GenerateOutput {
  nb::object sequences;                 // numpy int64: prompt + generated ids (seq2seq: start token + generated)
  std::vector<TokenId> generated_ids;   // of the first row
  std::string text;                     // the generated text of the first row ("" without a tokenizer)
  std::string stop_reason;
  text::GenerateTimings timings;
  text::SpeculativeStats speculative;
};

// Runs the prompts with the GIL released, calling back into Python once per token: one through text::generate, several
// through a BatchGenerator (the same tokens each would give alone; the weights are read once per step for all).
std::vector<text::GenerateResult> run(Model& m, const std::vector<std::vector<TokenId>>& prompts, const Settings& s) {
  if (prompts.size() > 1 && !s.streamer.is_none())
    throw Error("a streamer takes one sequence, and " + std::to_string(prompts.size()) + " prompts were given",
                "generate", "generate the prompts one at a time to stream each (transformers' streamers also take "
                "batch size 1)");
  std::optional<nb::python_error> pending;  // a KeyboardInterrupt or the streamer's exception
  const text::Tokenizer* tok = m.tokenizer ? &*m.tokenizer : nullptr;
  const bool has_streamer = !s.streamer.is_none();
  auto on_token = [&](std::string_view piece, TokenId id) -> bool {
    nb::gil_scoped_acquire gil;
    if (pending) return false;
    if (PyErr_CheckSignals() != 0) {
      pending.emplace();  // fetches the KeyboardInterrupt
      return false;
    }
    if (!has_streamer) return true;
    try {
      nb::object r = s.streamer(nb::str(piece.data(), piece.size()), id);
      return !(r.is(nb::handle(Py_False)));
    } catch (nb::python_error& e) {
      pending.emplace(std::move(e));
      return false;
    }
  };
  std::vector<text::GenerateResult> results;
  std::string failed;
  {
    nb::gil_scoped_release release;
    std::unique_lock<std::mutex> lock(*m.mutex, std::defer_lock), draft_lock;
    if (s.assistant && s.assistant->mutex != m.mutex) {
      draft_lock = std::unique_lock<std::mutex>(*s.assistant->mutex, std::defer_lock);
      std::lock(lock, draft_lock);
    } else {
      lock.lock();
    }
    if (prompts.size() == 1) {
      results.push_back(text::generate(*m.model, tok, prompts.front(), s.options, on_token));
    } else {
      text::BatchGenerator batch(*m.model, tok, {.max_batch_size = static_cast<int64_t>(prompts.size())});
      for (const auto& p : prompts) batch.add(p, s.options, on_token);
      for (text::SequenceResult& r : batch.run()) {  // in add order
        if (!r.ok() && failed.empty()) failed = "prompt " + std::to_string(r.id) + ": " + r.error;
        results.push_back(std::move(r.result));
      }
    }
  }
  if (pending) throw *pending;
  if (!failed.empty()) throw Error(failed, "generate");
  return results;
}

nb::object generate(Model& m, nb::handle inputs, std::size_t max_new_tokens, bool do_sample, float temperature,
                    std::size_t top_k, float top_p, float min_p, float repetition_penalty, std::optional<uint64_t> seed,
                    nb::handle stop, std::optional<std::vector<TokenId>> eos_token_id, nb::object streamer,
                    bool skip_special_tokens, bool add_special_tokens, bool return_dict, Model* assistant_model,
                    std::optional<int64_t> prompt_lookup_num_tokens, std::optional<int64_t> num_assistant_tokens,
                    std::optional<double> assistant_confidence_threshold) {
  Settings s;
  text::GenerateOptions& o = s.options;
  o.sampling = {.do_sample = do_sample, .temperature = temperature, .top_k = top_k, .top_p = top_p, .min_p = min_p,
                .repetition_penalty = repetition_penalty, .seed = seed ? *seed : std::random_device{}()};
  o.stop.max_new_tokens = max_new_tokens;
  o.stop.eos_token_ids = eos_token_id ? *eos_token_id : m.eos_token_ids;
  if (nb::isinstance<nb::str>(stop)) o.stop.stop_strings.push_back(nb::cast<std::string>(stop));
  else if (!stop.is_none())
    for (nb::handle x : stop) o.stop.stop_strings.push_back(nb::cast<std::string>(x));
  o.skip_special_tokens = skip_special_tokens;
  o.add_special_tokens = add_special_tokens;
  s.streamer = streamer;
  if (assistant_model) {
    if (assistant_model == &m) {
      throw Error(ErrorKind::InvalidValue, "the assistant model is the model itself", "generate",
                  "load the draft separately (a smaller model of the same vocabulary)");
    }
    o.speculative.draft = assistant_model->model.get();
    s.assistant = assistant_model;
  }
  if (prompt_lookup_num_tokens) o.speculative.lookup_tokens = *prompt_lookup_num_tokens;
  if (num_assistant_tokens) o.speculative.max_proposals = *num_assistant_tokens;
  if (assistant_confidence_threshold) {
    if (!(*assistant_confidence_threshold >= 0 && *assistant_confidence_threshold <= 1))
      throw Error(ErrorKind::InvalidValue, "assistant_confidence_threshold must lie in [0, 1]", "generate");
    o.speculative.draft_confidence = *assistant_confidence_threshold;
  }

  const bool text_in = nb::isinstance<nb::str>(inputs);
  std::vector<std::vector<TokenId>> prompts;
  bool two_d = false;
  if (text_in) {
    if (!m.tokenizer)
      throw Error("a text prompt needs the model's tokenizer, and " + m.name_or_path + " has none that ferry reads",
                  "generate", "pass token ids, or put the model's tokenizer.json in its folder");
    nb::gil_scoped_release release;
    prompts.push_back(m.tokenizer->encode(nb::cast<std::string>(inputs), add_special_tokens));
  } else {
    for (const auto& row : token_rows_arg(inputs, &two_d)) prompts.emplace_back(row.begin(), row.end());
  }

  const std::vector<text::GenerateResult> results = run(m, prompts, s);

  // Sequences as transformers returns them: causal = prompt + generated; seq2seq = start token + generated;
  // rows of different lengths padded at the end with the first EOS id (or 0).
  std::vector<std::vector<int64_t>> rows;
  for (const auto& r : results) {
    std::vector<int64_t> row;
    if (m.info().is_encoder_decoder) row.push_back(m.info().decoder_start_token_id);
    else row.assign(r.prompt_ids.begin(), r.prompt_ids.end());
    row.insert(row.end(), r.generated_ids.begin(), r.generated_ids.end());
    rows.push_back(std::move(row));
  }
  std::size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.size());
  const int64_t pad = o.stop.eos_token_ids.empty() ? 0 : o.stop.eos_token_ids.front();
  std::vector<int64_t> flat;
  for (auto& r : rows) {
    r.resize(width, pad);
    flat.insert(flat.end(), r.begin(), r.end());
  }
  std::vector<std::size_t> shape{rows.size(), width};
  if (!two_d && !text_in) shape.erase(shape.begin());
  nb::object sequences = ids_to_numpy(flat, shape);

  if (return_dict) {
    const auto& r = results.front();
    return nb::cast(
        GenerateOutput{sequences, r.generated_ids, r.text, text::to_string(r.stop_reason), r.timings, r.speculative});
  }
  if (text_in) return nb::str(results.front().text.c_str(), results.front().text.size());
  return sequences;
}

}  // namespace

void bind_generate(nb::module_& m) {
  nb::class_<GenerateOutput>(m, "GenerateOutput", "What generate(..., return_dict=True) returns.")
      .def_ro("sequences", &GenerateOutput::sequences,
              "int64 ids: prompt + generated (encoder-decoder: start token + generated), as generate() returns them.")
      .def_ro("generated_ids", &GenerateOutput::generated_ids, "The new tokens only (first sequence).")
      .def_ro("text", &GenerateOutput::text, "The generated text (first sequence; \"\" without a tokenizer).")
      .def_ro("stop_reason", &GenerateOutput::stop_reason,
              "\"eos_token\", \"stop_string\", \"max_new_tokens\", \"max_length\" or \"cancelled\".")
      .def_prop_ro("prefill_seconds", [](const GenerateOutput& g) { return g.timings.prefill_seconds; })
      .def_prop_ro("decode_seconds", [](const GenerateOutput& g) { return g.timings.decode_seconds; })
      .def_prop_ro("prefill_tokens_per_second",
                   [](const GenerateOutput& g) { return g.timings.prefill_tokens_per_second(); })
      .def_prop_ro("decode_tokens_per_second",
                   [](const GenerateOutput& g) { return g.timings.decode_tokens_per_second(); })
      .def_prop_ro(
          "speculative",
          [](const GenerateOutput& g) {
            nb::dict d;
            d["proposed"] = g.speculative.proposed;
            d["accepted"] = g.speculative.accepted;
            d["target_forwards"] = g.speculative.target_forwards;
            d["draft_forwards"] = g.speculative.draft_forwards;
            return d;
          },
          "Speculative decoding's counts: {\"proposed\", \"accepted\", \"target_forwards\", "
          "\"draft_forwards\"} (zeros without it).");

  nb::handle model_class = m.attr("PreTrainedModel");
  nb::cpp_function_def(
      &generate, nb::scope(model_class), nb::name("generate"), nb::is_method(), "inputs"_a, "max_new_tokens"_a = 20,
      "do_sample"_a = false, "temperature"_a = 1.0f, "top_k"_a = 50, "top_p"_a = 1.0f, "min_p"_a = 0.0f,
      "repetition_penalty"_a = 1.0f, "seed"_a = nb::none(), "stop"_a = nb::none(), "eos_token_id"_a = nb::none(),
      "streamer"_a = nb::none(), "skip_special_tokens"_a = true, "add_special_tokens"_a = true, "return_dict"_a = false,
      "assistant_model"_a = nb::none(), "prompt_lookup_num_tokens"_a = nb::none(),
      "num_assistant_tokens"_a = nb::none(), "assistant_confidence_threshold"_a = nb::none(),
      "transformers' generate: greedy (do_sample=False) or sampled with temperature, top_k, top_p, min_p; "
      "repetition_penalty; seed (None = random) makes sampling repeatable.\n\n"
      "inputs: a text (needs the folder's tokenizer; returns the generated text) or token ids [T] / [B, T] (returns "
      "int64 ids: prompt + generated for causal models, start token + generated for encoder-decoders, rows padded "
      "with the first EOS id).\n"
      "stop: a string or list of strings that end generation (cut from the text). eos_token_id: default the model's.\n"
      "streamer: called as streamer(text_piece, token_id) for each token, once more with id -1 for text held back "
      "at the end; returning False stops generation.\n"
      "return_dict=True returns a GenerateOutput (sequences, generated_ids, text, stop_reason, timings).\n"
      "Speculative decoding (each prompt on its own): assistant_model= a smaller model of the same vocabulary whose "
      "tokens the model checks several per forward (up to num_assistant_tokens, default 8, adapting; the assistant "
      "stops where its top probability is below assistant_confidence_threshold; None: where the chance that all its "
      "proposals are kept falls below what a draft forward costs against a step of the model), and/or "
      "prompt_lookup_num_tokens= N tokens proposed from earlier text. Greedy, the output is what plain generation "
      "gives; sampling, the assistant samples and speculative sampling's rule keeps the model's distribution.\n"
      "Releases the GIL; Ctrl-C (KeyboardInterrupt) stops at the next token.");
}

}  // namespace ferry::python
