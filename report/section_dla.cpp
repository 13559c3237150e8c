// The report's direct logit attribution (interp/direct_logit_attribution.h) on the report's
// prompt: each part's share of the answer's logit at the answer position.
#include "interp/direct_logit_attribution.h"
#include "nn/module.h"
#include "report/sections.h"

namespace gradlab::report {

SectionResult collect_dla(ReportRun& run) {
  const ReportPrompt* prompt = run.prompt();
  if (!prompt) return {nullptr, "not computed: the report was made without a prompt"};
  nn::SequenceModel& model = *run.trained().model;
  interp::DlaOptions options;
  // A language model's answer is the token after the text, read at the last position.
  if (run.trained().vocabulary) options.position = prompt->batch.inputs.shape.at(1) - 1;
  interp::DlaRows rows;
  {
    nn::EvalScope eval(model);
    rows = interp::direct_logit_attribution(model, prompt->batch, options);
  }
  return {{{"labels", rows.labels},
           {"contributions", rows.contributions},
           {"logit", rows.logits.at(0)},
           {"position", rows.positions.at(0)},
           {"answer", run.token_text(rows.answers.at(0))}},
          ""};
}

}  // namespace gradlab::report
