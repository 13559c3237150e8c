// Writing a run's report: the prompt from the command line or the held-out set, then the page.
#include "cli/run_report.h"

#include <filesystem>

#include "cli/input_set_option.h"
#include "report/page.h"
#include "report/sections.h"

namespace gradlab::cli {
namespace {

std::vector<std::string> token_texts(const train::TrainedModel& trained, const Indices& tokens) {
  std::vector<std::string> texts;
  for (const int64_t token : tokens.values) {
    texts.push_back(trained.vocabulary ? trained.vocabulary->decode(token) : std::to_string(token));
  }
  return texts;
}

}  // namespace

int write_run_report(const std::string& command, const std::string& run_dir, const std::string& out,
                     const CheckpointArgs& c, bool live) {
  std::optional<report::ReportPrompt> prompt;
  if (std::filesystem::exists(c.checkpoint)) {
    InputSetArgs inputs;
    const bool given = !c.input.empty() || !c.prompt.empty();
    if (!given) {
      inputs.held_out = 1;
      inputs.given = true;
    }
    std::optional<InputSet> set;
    if (const int code = load_input_set(command, c, inputs, set); code >= 0) return code;
    const nn::SequenceBatch& batch = set->groups.front().batch;
    prompt = report::ReportPrompt{
        batch, token_texts(set->trained, batch.inputs), token_texts(set->trained, batch.source),
        given ? (c.input.empty() ? "--prompt" : "--input") : "the first held-out example"};
  }
  report::ReportRun run(run_dir, std::move(prompt));
  report::write_page(out, report::collect_report(run, live));
  return -1;
}

}  // namespace gradlab::cli
