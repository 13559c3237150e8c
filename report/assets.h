// The report's front end, inlined at build time (report/inline_assets.cmake): the bundle of
// scripts (Chart.js, its matrix plugin, report/web's core and section renderers) and the style.
#pragma once

#include <string>

namespace gradlab::report {

const std::string& report_script();
const std::string& report_style();

}  // namespace gradlab::report
