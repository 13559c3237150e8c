// The report's logit lens (interp/logit_lens.h) on the report's prompt: after each block, the
// probability of each position's target and the most likely token.
#include <cmath>

#include "interp/logit_lens.h"
#include "nn/module.h"
#include "report/sections.h"

namespace gradlab::report {

SectionResult collect_logit_lens(ReportRun& run) {
  const ReportPrompt* prompt = run.prompt();
  if (!prompt) return {nullptr, "not computed: the report was made without a prompt"};
  nn::SequenceModel& model = *run.trained().model;
  interp::LensProbabilities lens;
  {
    nn::EvalScope eval(model);
    NoGradGuard no_grad;
    lens = interp::lens_probabilities(interp::logit_lens(model, prompt->batch),
                                      prompt->batch.targets, 1);
  }
  nlohmann::json target = nlohmann::json::array(), top = nlohmann::json::array(),
                 top_p = nlohmann::json::array();
  for (size_t i = 0; i < lens.target_probability.size(); ++i) {
    const double p = lens.target_probability[i];
    target.push_back(std::isnan(p) ? nlohmann::json(nullptr) : nlohmann::json(p));
    top.push_back(run.token_text(lens.top_tokens[i]));
    top_p.push_back(lens.top_probabilities[i]);
  }
  nlohmann::json targets = nlohmann::json::array();
  for (const int64_t t : prompt->batch.targets.values) {
    targets.push_back(t == nn::kIgnoreTarget ? nlohmann::json(nullptr)
                                             : nlohmann::json(run.token_text(t)));
  }
  return {{{"layers", lens.layers},
           {"tokens", prompt->input_tokens},
           {"targets", targets},
           {"target_probability", target},
           {"top_token", top},
           {"top_probability", top_p}},
          ""};
}

}  // namespace gradlab::report
