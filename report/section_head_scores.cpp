// The report's head scores (interp/head_scores.h): previous-token, duplicate-token and induction
// scores of every head, on random sequences repeated twice, as `gradlab heads` measures them.
#include "interp/head_scores.h"
#include "report/sections.h"

namespace gradlab::report {

SectionResult collect_head_scores(ReportRun& run) {
  nn::SequenceModel& model = *run.trained().model;
  nlohmann::json points = nlohmann::json::array();
  for (const interp::LayerHeadScores& layer : interp::head_scores(model, {})) {
    points.push_back({{"point", layer.point},
                      {"previous_token", layer.previous_token},
                      {"duplicate_token", layer.duplicate_token},
                      {"induction", layer.induction}});
  }
  return {{{"points", points}, {"command", "gradlab heads --checkpoint " + run.path("best.h5")}},
          ""};
}

}  // namespace gradlab::report
