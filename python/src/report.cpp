// The report's pieces the notebook views (gradlab.vis) share with `gradlab report`
// (report/page.h, report/sections.h): the one escaping of user text into a page, and a run's CSV
// files read as the report reads them.
#include <nlohmann/json.hpp>

#include "python/src/bindings.h"
#include "report/page.h"
#include "report/sections.h"

namespace gradlab::python {

void bind_report(py::module_& m) {
  m.def(
      "embedded_json",
      [](const std::string& json_text) {
        return report::embedded_json(nlohmann::json::parse(json_text));
      },
      py::arg("json_text"),
      "JSON text as the report embeds it in a page: non-ASCII, '<', '>' and '&' escaped");
  m.def(
      "csv_columns", [](const std::string& path) { return report::csv_columns(path).dump(); },
      py::arg("path"),
      "a run's CSV file as JSON text {column: [numbers or null]}; 'null' without the file");
}

}  // namespace gradlab::python
