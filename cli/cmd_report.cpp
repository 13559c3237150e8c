// `gradlab report`: one self-contained HTML page of a run (report/): its configuration, curves,
// attention patterns and instruments, computed from its best checkpoint where the run lacks them.
#include <cstdio>
#include <filesystem>

#include "autograd/threads.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/run_report.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct ReportArgs {
  ReportArgs() {
    add_help_option(checkpoint.options);
    checkpoint.options.add_options()("run", po::value(&run)->required(),
                                     "the run directory (gradlab train --out), also the first "
                                     "argument")("out", po::value(&checkpoint.out),
                                                 "the HTML file (default RUN/report.html)")(
        "overwrite", po::bool_switch(&checkpoint.overwrite), "replace --out if it exists");
    add_prompt_options(checkpoint);
    add_threads_option(checkpoint.options, checkpoint.threads);
  }
  CheckpointArgs checkpoint{
      "gradlab report: one HTML page of a run, self-contained and offline: configuration, "
      "training curves, attention patterns and the instruments (docs/report.md)\nOptions"};
  const po::options_description& options = checkpoint.options;
  std::string run;
};

int parse_report(const Arguments& args, ReportArgs& a) {
  CheckpointArgs& c = a.checkpoint;
  po::positional_options_description positional;
  positional.add("run", 1);
  if (const int code = parse_or_usage("report", args, c.options, c.vm, &positional); code >= 0) {
    return code;
  }
  if (const int code = check_threads("report", c.threads, c.options); code >= 0) return code;
  if (c.vm.count("input") && c.vm.count("prompt")) {
    return usage_error("report", "give at most one of --input and --prompt", c.options);
  }
  std::error_code error;
  if (!std::filesystem::is_directory(a.run, error)) {
    return usage_error("report", a.run + ": not a run directory", c.options);
  }
  if (c.out.empty()) c.out = (std::filesystem::path(a.run) / "report.html").string();
  if (std::filesystem::exists(c.out, error) && !c.overwrite) {
    return usage_error(
        "report", "--out " + c.out + " already exists; pass --overwrite to replace it", c.options);
  }
  c.checkpoint = (std::filesystem::path(a.run) / "best.h5").string();
  return -1;
}

int run_report(ReportArgs& a) {
  CheckpointArgs& c = a.checkpoint;
  set_threads(static_cast<int>(c.threads));
  if (const int code = write_run_report("report", a.run, c.out, c, false); code >= 0) return code;
  std::printf("wrote the report of %s to %s\n", a.run.c_str(), c.out.c_str());
  return kExitOk;
}

const CommandRow report_row{"report",
                            "one self-contained HTML page of a run: curves, attention, instruments",
                            {},
                            parse_report,
                            run_report};

}  // namespace

}  // namespace gradlab::cli
