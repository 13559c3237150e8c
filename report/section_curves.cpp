// The report's training curves: every column of the run's metrics.csv (train/metrics_log.h), a
// row per evaluation, as numbers (null where a cell is empty).
#include "report/sections.h"

namespace gradlab::report {

SectionResult collect_curves(ReportRun& run) {
  nlohmann::json columns = csv_columns(run.path("metrics.csv"));
  if (columns.is_null()) {
    return {nullptr,
            "not computed: the run has no metrics.csv yet (gradlab train writes a row at "
            "each evaluation)"};
  }
  return {{{"columns", std::move(columns)}}, ""};
}

}  // namespace gradlab::report
