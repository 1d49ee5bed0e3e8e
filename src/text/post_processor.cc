// Post-processors (see post_processor.h).
#include "text/post_processor.h"

#include <map>
#include <string>

namespace ferry::text::detail {
namespace {

// One element of a template: the sequence itself or a named special token.
struct TemplatePiece {
  bool is_sequence = false;
  bool sequence_b = false;
  std::string special;  // name in "special_tokens" when !is_sequence
};

TemplatePiece parse_template_piece(const JsonView& json) {
  TemplatePiece p;
  if (json.raw().is_string()) {  // the short form "$A", "$B:1", "[CLS]"
    const std::string s = json.as_string();
    if (!s.empty() && s[0] == '$') {
      p.is_sequence = true;
      p.sequence_b = s.size() > 1 && (s[1] == 'B' || s[1] == 'b');
    } else {
      p.special = s.substr(0, s.find(':'));
    }
    return p;
  }
  json.expect_object();
  if (auto seq = json.get("Sequence")) {
    p.is_sequence = true;
    const std::string id = seq->at("id").as_string();
    if (id != "A" && id != "B") seq->at("id").fail("expected \"A\" or \"B\", got \"" + id + "\"");
    p.sequence_b = id == "B";
    seq->at("type_id").as_u32();
    return p;
  }
  if (auto sp = json.get("SpecialToken")) {
    p.special = sp->at("id").as_string();
    sp->at("type_id").as_u32();
    return p;
  }
  json.fail("expected {\"Sequence\": ...} or {\"SpecialToken\": ...}");
}

class TemplateProcessing final : public PostProcessor {
 public:
  explicit TemplateProcessing(const JsonView& json) {
    std::map<std::string, std::vector<std::int32_t>> specials;
    if (auto st = json.get("special_tokens")) {
      st->for_each_member([&](const std::string& name, const JsonView& tok) {
        const JsonView ids = tok.at("ids");
        std::vector<std::int32_t> v;
        for (std::size_t i = 0; i < ids.size(); ++i) v.push_back(static_cast<std::int32_t>(ids[i].as_u32()));
        tok.at("tokens").expect_array();
        specials[name] = std::move(v);
      });
    }
    auto read = [&](const char* key) {
      std::vector<TemplatePiece> pieces;
      const JsonView list = json.at(key);
      for (std::size_t i = 0; i < list.size(); ++i) {
        TemplatePiece p = parse_template_piece(list[i]);
        if (!p.is_sequence && !specials.count(p.special)) {
          list[i].fail("special token \"" + p.special + "\" is missing from special_tokens");
        }
        pieces.push_back(std::move(p));
      }
      return pieces;
    };
    const std::vector<TemplatePiece> single = read("single");
    read("pair");
    for (std::size_t i = 0; i < single.size(); ++i) {
      if (single[i].is_sequence && single[i].sequence_b) {
        json.at("single")[i].fail("the single-sequence template refers to sequence B");
      }
      if (single[i].is_sequence) steps_.push_back({true, {}});
      else steps_.push_back({false, specials[single[i].special]});
    }
  }
  void process(std::vector<std::int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    std::vector<std::int32_t> out;
    out.reserve(ids.size() + 4);
    for (const Step& s : steps_) {
      if (s.is_sequence) out.insert(out.end(), ids.begin(), ids.end());
      else out.insert(out.end(), s.ids.begin(), s.ids.end());
    }
    ids = std::move(out);
  }

 private:
  struct Step {
    bool is_sequence;
    std::vector<std::int32_t> ids;
  };
  std::vector<Step> steps_;
};

// RobertaProcessing / BertProcessing: [cls] ids [sep].
class ClsSep final : public PostProcessor {
 public:
  explicit ClsSep(const JsonView& json) : sep_(read_id(json.at("sep"))), cls_(read_id(json.at("cls"))) {}
  void process(std::vector<std::int32_t>& ids, bool add_special_tokens) const override {
    if (!add_special_tokens) return;
    ids.insert(ids.begin(), cls_);
    ids.push_back(sep_);
  }

 private:
  static std::int32_t read_id(const JsonView& pair) {  // ["<s>", 0]
    if (pair.size() != 2) pair.fail("expected [token, id]");
    pair[0].as_string();
    return static_cast<std::int32_t>(pair[1].as_u32());
  }
  std::int32_t sep_, cls_;  // HF's field order: sep, then cls
};

class NoIdChange final : public PostProcessor {
 public:
  void process(std::vector<std::int32_t>&, bool) const override {}
};

class Sequence final : public PostProcessor {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PostProcessor>> steps) : steps_(std::move(steps)) {}
  void process(std::vector<std::int32_t>& ids, bool add_special_tokens) const override {
    for (const auto& s : steps_) s->process(ids, add_special_tokens);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> steps_;
};

}  // namespace

std::unique_ptr<PostProcessor> parse_post_processor(const JsonView& json) {
  json.expect_object();
  const std::string type = json.at("type").as_string();
  if (type == "TemplateProcessing") return std::make_unique<TemplateProcessing>(json);
  if (type == "RobertaProcessing" || type == "BertProcessing") return std::make_unique<ClsSep>(json);
  if (type == "ByteLevel") return std::make_unique<NoIdChange>();
  if (type == "Sequence") {
    const JsonView list = json.at("processors");
    std::vector<std::unique_ptr<PostProcessor>> steps;
    for (std::size_t i = 0; i < list.size(); ++i) steps.push_back(parse_post_processor(list[i]));
    return std::make_unique<Sequence>(std::move(steps));
  }
  json.at("type").fail("unknown post-processor type \"" + type + "\"");
}

}  // namespace ferry::text::detail
