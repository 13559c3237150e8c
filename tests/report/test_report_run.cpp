// The report of real runs, made by the command line: `gradlab train --report` leaves the whole,
// no longer live page when the run ends (a live one lists only its cheap sections), and a
// modular-addition run's report has its Fourier section, with the curves of its fourier.csv.
// The page's data is read back from its JSON element; the browser test draws such pages.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "report/sections.h"
#include "tests/cli_runner.h"

namespace gradlab::testing {
namespace test_report_run {

// The data element of a report page, parsed.
nlohmann::json page_data(const std::string& path) {
  const std::string page = read_text(path);
  const std::string open = "<script type=\"application/json\" id=\"gradlab-data\">";
  const size_t start = page.find(open);
  EXPECT_NE(start, std::string::npos) << path;
  if (start == std::string::npos) return nullptr;
  const size_t end = page.find("</script>", start);
  return nlohmann::json::parse(page.substr(start + open.size(), end - start - open.size()));
}

// Each section's id: "data" when drawn, else its missing text.
std::map<std::string, std::string> section_states(const nlohmann::json& data) {
  std::map<std::string, std::string> states;
  for (const nlohmann::json& s : data["sections"]) {
    states[s["id"]] = s.contains("data") ? "data" : s["missing"].get<std::string>();
  }
  return states;
}

TEST(ReportRun, TrainWithReportLeavesTheWholePageWhenTheRunEnds) {
  TempDir tmp;
  const std::string run = tmp.file("run");
  std::vector<std::string> args = {"train", "--out", run, "--report"};
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const CommandResult r = run_gradlab(args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();

  const nlohmann::json final_page = page_data(run + "/report.html");
  EXPECT_FALSE(final_page["live"].get<bool>());
  std::map<std::string, std::string> states = section_states(final_page);
  for (const char* id : {"model_card", "curves", "attention", "head_scores", "ablation", "dla"}) {
    EXPECT_EQ(states[id], "data") << id;
  }
  EXPECT_EQ(states.count("fourier"), 0u) << "a copy run has no Fourier section";
  EXPECT_EQ(final_page["sections"][1]["data"]["columns"]["step"],
            nlohmann::json::array({1.0, 2.0}));

  // What each evaluation wrote: the cheap sections, the others promised for the end.
  report::ReportRun live_run(run, std::nullopt);
  states = section_states(report::collect_report(live_run, true));
  EXPECT_EQ(states["curves"], "data");
  EXPECT_EQ(states["model_card"], "data");
  EXPECT_EQ(states["head_scores"], "computed when the run ends");
}

TEST(ReportRun, AModularRunHasItsFourierSectionAndCurves) {
  TempDir tmp;
  const std::string run = tmp.file("run");
  const CommandResult trained = run_gradlab({"train",   "--out",
                                             run,       "--task",
                                             "modular", "--modulus",
                                             "7",       "--train-fraction",
                                             "0.5",     "--d-model",
                                             "8",       "--heads",
                                             "2",       "--d-ff",
                                             "16",      "--layers",
                                             "1",       "--batch-size",
                                             "0",       "--steps",
                                             "2",       "--eval-every",
                                             "1",       "--save-every",
                                             "1",       "--target-accuracy",
                                             "0"});
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const auto fourier = [&] {
    const CommandResult r = run_gradlab({"report", run, "--overwrite"});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    const nlohmann::json page = page_data(run + "/report.html");
    for (const nlohmann::json& s : page["sections"]) {
      if (s["id"] == "fourier") return s;
    }
    ADD_FAILURE() << "no Fourier section";
    return nlohmann::json();
  };

  nlohmann::json section = fourier();
  ASSERT_TRUE(section.contains("data")) << section.dump();
  EXPECT_EQ(section["data"]["modulus"], 7);
  EXPECT_EQ(section["data"]["embedding_norms"].size(), 4u);  // the constant and 3 frequencies
  EXPECT_EQ(section["data"]["cluster_counts"].size(), 4u);
  EXPECT_EQ(section["data"]["neurons"], 16);
  EXPECT_TRUE(section["data"]["curve"].is_null());
  EXPECT_EQ(section["data"]["curve_command"], "gradlab fourier --run " + run);

  const CommandResult curve = run_gradlab({"fourier", "--run", run});
  ASSERT_EQ(curve.exit_code, 0) << curve.describe();
  section = fourier();
  const nlohmann::json& columns = section["data"]["curve"];
  EXPECT_EQ(columns["step"], nlohmann::json::array({1.0, 2.0})) << columns.dump();
  EXPECT_EQ(columns["restricted_loss"].size(), 2u);
  EXPECT_TRUE(columns["restricted_loss"][0].is_number());
}

}  // namespace test_report_run
}  // namespace gradlab::testing
