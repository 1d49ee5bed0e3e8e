// SpeculativeFlags (see speculative_flags.h).
#include "speculative_flags.h"

namespace ferry::cli {

void SpeculativeFlags::add_to(CLI::App& cmd, bool per_request) {
  cmd.add_option("--lookup", lookup,
                 std::string("speculative decoding by prompt lookup: propose up to N tokens per step, those that "
                             "followed the last words' latest earlier occurrence in the prompt or the output; the "
                             "model checks them in one forward and the output stays what plain decoding gives "
                             "(transformers' prompt_lookup_num_tokens)") +
                     (per_request ? "; a request's \"prompt_lookup_num_tokens\" overrides it (0: off)" : ""))
      ->check(CLI::PositiveNumber);
  cmd.add_option("--draft-model", draft_model,
                 std::string("speculative decoding with a draft model: a smaller model folder or GGUF file with the "
                             "same vocabulary, loaded whole on the cpu; its tokens are checked by the model, several "
                             "per forward: greedy ones, or under sampling ones it samples, kept by speculative "
                             "sampling's rule so that the output's distribution is the model's (transformers' "
                             "assistant_model)") +
                     (per_request ? "; a request's \"num_assistant_tokens\" sets its proposals per step (0: off)"
                                  : ""));
  cmd.add_option("--draft-max", draft_max,
                 "speculative decoding: the most tokens proposed per step (default 8; the number adapts to how many "
                 "are kept)")
      ->check(CLI::PositiveNumber);
  cmd.add_option("--draft-p-min", draft_p_min,
                 "speculative decoding: the draft stops proposing where its most likely token's probability is below "
                 "P (transformers' assistant_confidence_threshold; 0 never stops). Default auto: while the chance "
                 "that all its proposals are kept exceeds what a draft forward costs against a step of the model, as "
                 "measured")
      ->check(CLI::Range(0.0, 1.0));
  cmd.add_flag("--draft-greedy", draft_greedy,
               "with --draft-model and sampling: the draft proposes its greedy tokens, checked by replaying plain "
               "sampling, so the output equals plain sampling's with the same seed (fewer proposals kept)");
}

text::SpeculativeOptions SpeculativeFlags::options(models::LanguageModel* draft) const {
  text::SpeculativeOptions o;
  o.lookup_tokens = lookup;
  o.draft = draft;
  o.max_proposals = draft_max;
  o.draft_sample = !draft_greedy;
  o.draft_confidence = draft_p_min;
  return o;
}

nlohmann::json speculative_json(const text::SpeculativeStats& s) {
  return {{"proposed", s.proposed},
          {"accepted", s.accepted},
          {"acceptance_rate", s.acceptance_rate()},
          {"target_forwards", s.target_forwards},
          {"draft_forwards", s.draft_forwards}};
}

}  // namespace ferry::cli
