// ferry.AutoTokenizer.from_pretrained(path) and the Tokenizer it returns: tokenizer.json read by ferry's own
// tokenizer (text/tokenizer.h) and the folder's chat template (text/chat_template.h), with transformers' method names.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <filesystem>

#include "bindings.h"
#include "ferry/core/error.h"
#include "ferry/text/chat_template.h"
#include "ferry/text/pretrained.h"
#include "ferry/text/tokenizer.h"
#include "tokenizer_loading.h"

namespace ferry::python {
namespace {

using namespace nb::literals;
using text::TokenId;
using text::Tokenizer;

// A list of ids, or numpy/torch ids of one row.
std::vector<TokenId> ids_arg(nb::handle ids) {
  bool two_d = false;
  auto rows = token_rows_arg(ids, &two_d);
  if (two_d && rows.size() != 1)
    throw Error("decode takes one sequence, got " + std::to_string(rows.size()), "ids", "use batch_decode for several");
  std::vector<TokenId> out;
  for (int64_t id : rows.front()) out.push_back(static_cast<TokenId>(id));
  return out;
}

nb::object as_tensors(nb::list rows, const std::optional<std::string>& kind, bool single) {
  if (!kind) return single ? rows[0] : nb::object(rows);
  nb::object np = nb::module_::import_("numpy");
  nb::object array = np.attr("asarray")(rows, "dtype"_a = "int64");  // [n, T]: every row must be as long
  if (nb::cast<std::size_t>(array.attr("ndim")) != 2)
    throw Error("texts of different lengths cannot make one array (ferry's tokenizer does not pad)",
                "return_tensors", "call it once per text, or leave return_tensors unset for lists");
  if (*kind == "np") return array;
  if (*kind == "pt") return nb::module_::import_("torch").attr("from_numpy")(array);
  throw Error("return_tensors=\"" + *kind + "\" is not supported", "return_tensors", "use \"np\", \"pt\" or None");
}

nb::dict call(const TokenizerObject& t, nb::handle texts, bool add_special_tokens,
              std::optional<std::string> return_tensors) {
  const bool single = nb::isinstance<nb::str>(texts);
  std::vector<std::string> owned;
  if (single) owned.push_back(nb::cast<std::string>(texts));
  else
    for (nb::handle t : texts) owned.push_back(nb::cast<std::string>(t));
  std::vector<std::string_view> views(owned.begin(), owned.end());
  std::vector<std::vector<TokenId>> ids;
  {
    nb::gil_scoped_release release;
    ids = t.tokenizer.encode_batch(views, add_special_tokens);
  }
  nb::list input_ids, attention_mask;
  for (const auto& row : ids) {
    input_ids.append(nb::cast(row));
    attention_mask.append(nb::cast(std::vector<int>(row.size(), 1)));
  }
  nb::dict out;
  out["input_ids"] = as_tensors(input_ids, return_tensors, single);
  out["attention_mask"] = as_tensors(attention_mask, return_tensors, single);
  return out;
}

// transformers' apply_chat_template(conversation, tools=None, add_generation_prompt=False, tokenize=True,
// chat_template=None, **kwargs): the rendered prompt, or its ids (encoded without special tokens, as transformers
// does: the template writes them).
nb::object apply_chat_template(const TokenizerObject& t, nb::handle conversation, nb::handle tools,
                               bool add_generation_prompt, bool tokenize, std::optional<std::string> chat_template,
                               std::optional<std::string> return_tensors, nb::kwargs kwargs) {
  nb::object dumps = nb::module_::import_("json").attr("dumps");
  text::ChatTemplateOptions options;
  options.add_generation_prompt = add_generation_prompt;
  if (!tools.is_none()) options.tools = nlohmann::ordered_json::parse(nb::cast<std::string>(dumps(tools)));
  if (kwargs.size() > 0) options.extra_context = nlohmann::ordered_json::parse(nb::cast<std::string>(dumps(kwargs)));
  const auto messages = nlohmann::ordered_json::parse(nb::cast<std::string>(dumps(conversation)));
  std::shared_ptr<const text::ChatTemplate> tmpl = t.chat_template;
  if (chat_template) {
    nlohmann::json special = nlohmann::json::object();
    if (tmpl) special = nlohmann::json::parse(tmpl->special_tokens().dump());
    tmpl = std::make_shared<const text::ChatTemplate>(*chat_template, special, "chat_template argument");
  }
  if (!tmpl)
    throw Error("this tokenizer has no chat template", "apply_chat_template",
                "the folder needs chat_template.jinja or a \"chat_template\" in tokenizer_config.json; or pass "
                "chat_template=...");
  std::string prompt;
  std::vector<TokenId> ids;
  {
    nb::gil_scoped_release release;
    prompt = tmpl->apply(messages, options);
    if (tokenize) ids = t.tokenizer.encode(prompt, /*add_special_tokens=*/false);
  }
  if (!tokenize) return nb::str(prompt.c_str(), prompt.size());
  if (!return_tensors) return nb::cast(ids);
  nb::list rows;
  rows.append(nb::cast(ids));
  return as_tensors(rows, return_tensors, /*single=*/false);  // [1, T], as transformers returns it
}

}  // namespace

TokenizerObject load_tokenizer(const std::filesystem::path& path) {
  TokenizerObject out{text::load_tokenizer(path), nullptr};
  if (auto chat = text::load_chat_template(path))
    out.chat_template = std::make_shared<const text::ChatTemplate>(std::move(*chat));
  return out;
}

void bind_tokenizer(nb::module_& m) {
  nb::class_<TokenizerObject>(m, "Tokenizer",
                        "A Hugging Face fast tokenizer (tokenizer.json), read and run by ferry: the same ids as the "
                        "`tokenizers` package. Thread-safe.")
      .def("encode", [](const TokenizerObject& t, std::string_view text, bool add_special_tokens) {
        nb::gil_scoped_release release;
        return t.tokenizer.encode(text, add_special_tokens);
      }, "text"_a, "add_special_tokens"_a = true,
      "Text to token ids (with the post-processor's special tokens, e.g. BOS, unless add_special_tokens=False).")
      .def("decode", [](const TokenizerObject& t, nb::handle ids, bool skip_special_tokens) {
        std::vector<TokenId> v = ids_arg(ids);
        nb::gil_scoped_release release;
        return t.tokenizer.decode(v, skip_special_tokens);
      }, "ids"_a, "skip_special_tokens"_a = false, "Token ids (a list, numpy or torch row) to text.")
      .def("batch_decode", [](const TokenizerObject& t, nb::handle rows, bool skip_special_tokens) {
        std::vector<std::string> out;
        for (const auto& row : token_rows_arg(rows, nullptr))
          out.push_back(t.tokenizer.decode(std::vector<TokenId>(row.begin(), row.end()), skip_special_tokens));
        return out;
      }, "sequences"_a, "skip_special_tokens"_a = false, "decode() of each row.")
      .def("__call__", &call, "text"_a, "add_special_tokens"_a = true, "return_tensors"_a = nb::none(),
           "transformers' tokenizer(text): {\"input_ids\": ..., \"attention_mask\": ...} for a text or a list of "
           "texts; return_tensors=\"np\" or \"pt\" gives [n, T] arrays (texts of equal length: no padding).")
      .def("convert_tokens_to_ids",
           [](const TokenizerObject& t, const std::string& token) { return t.tokenizer.token_to_id(token); },
           "token"_a, "The id of a token string, or None.")
      .def("convert_ids_to_tokens", [](const TokenizerObject& t, TokenId id) { return t.tokenizer.id_to_token(id); },
           "id"_a,
           "The token string of an id, or None.")
      .def_prop_ro("vocab_size", [](const TokenizerObject& t) { return t.tokenizer.vocab_size(); },
                   "One past the largest id (vocabulary and added tokens).")
      .def("__len__", [](const TokenizerObject& t) { return t.tokenizer.vocab_size(); })
      .def_prop_ro("all_special_ids", [](const TokenizerObject& t) {
        std::vector<TokenId> ids;
        for (const auto& a : t.tokenizer.added_tokens())
          if (a.special) ids.push_back(a.id);
        return ids;
      }, "The ids of the added tokens marked special.")
      .def_prop_ro("chat_template", [](const TokenizerObject& t) -> std::optional<std::string> {
        if (!t.chat_template) return std::nullopt;
        return t.chat_template->source();
      }, "The folder's chat template (Jinja source), or None.")
      .def("apply_chat_template", &apply_chat_template, "conversation"_a, "tools"_a = nb::none(),
           "add_generation_prompt"_a = false, "tokenize"_a = true, "chat_template"_a = nb::none(),
           "return_tensors"_a = nb::none(), "kwargs"_a,
           "transformers' apply_chat_template: renders the messages ([{\"role\": ..., \"content\": ...}]) with "
           "the folder's chat template (ferry's Jinja engine, byte for byte as transformers renders it); returns "
           "the ids (tokenize=True, the default, without adding special tokens: the template writes them) or the "
           "text (tokenize=False). Extra keyword arguments are template variables (e.g. enable_thinking=False).");

  struct AutoTokenizer {};
  nb::class_<AutoTokenizer>(m, "AutoTokenizer", "transformers' AutoTokenizer, for tokenizer.json files.")
      .def_static("from_pretrained", [](nb::handle path) { return load_tokenizer(path_arg(path)); }, "path"_a,
                  "The tokenizer of a model folder (its tokenizer.json), a tokenizer.json file, or a GGUF file. "
                  "Raises ferry.NotFoundError when there is none.");
}

}  // namespace ferry::python
