// The report's ablation (interp/ablation.h): the held-out loss and accuracy with each head and
// each feed-forward knocked out in turn (mean ablation), against the intact model.
#include "interp/ablation.h"
#include "report/sections.h"

namespace gradlab::report {
namespace {

nlohmann::json scores(const train::Scores& s) {
  return {{"loss", s.loss}, {"token_accuracy", s.token_accuracy}, {"exact_match", s.exact_match}};
}

}  // namespace

SectionResult collect_ablation(ReportRun& run) {
  train::Trainer& scorer = run.scorer();
  nn::SequenceModel& model = *run.trained().model;
  nn::EvalScope eval(model);
  const interp::HeldOutEvaluation<train::Metrics> set{model, scorer.heldout(),
                                                      [&] { return scorer.evaluate(); }};
  const interp::AblationResults<train::Metrics> results =
      interp::ablate_each_part(set, interp::AblationMode::mean);
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& part : results.parts) {
    nlohmann::json row = scores(part.metrics);
    row["point"] = part.point;
    row["head"] = part.head;
    parts.push_back(std::move(row));
  }
  return {{{"mode", "mean"},
           {"intact", scores(results.intact)},
           {"parts", parts},
           {"command", "gradlab ablate --checkpoint " + run.path("best.h5") + " --mode mean"}},
          ""};
}

}  // namespace gradlab::report
