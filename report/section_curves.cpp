// The report's training curves: every column of the run's metrics.csv (train/metrics_log.h), a
// row per evaluation, as numbers (null where a cell is empty).
#include <fstream>
#include <sstream>

#include "report/sections.h"

namespace gradlab::report {
namespace {

std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

}  // namespace

SectionResult collect_curves(ReportRun& run) {
  std::ifstream in(run.path("metrics.csv"));
  std::string line;
  if (!in || !std::getline(in, line)) {
    return {nullptr,
            "not computed: the run has no metrics.csv yet (gradlab train writes a row at "
            "each evaluation)"};
  }
  const std::vector<std::string> names = cells(line);
  nlohmann::json columns = nlohmann::json::object();
  for (const std::string& name : names) columns[name] = nlohmann::json::array();
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> row = cells(line);
    for (size_t i = 0; i < names.size(); ++i) {
      nlohmann::json value = nullptr;
      if (i < row.size() && !row[i].empty()) {
        try {
          value = std::stod(row[i]);
        } catch (const std::exception&) {
          value = nullptr;  // a row cut short by a kill while it was written
        }
      }
      columns[names[i]].push_back(value);
    }
  }
  return {{{"columns", columns}}, ""};
}

}  // namespace gradlab::report
