// Writing a run's report (report/): the prompt its per-prompt sections read, taken from the
// command line or the run's first held-out example, and the page written atomically. `gradlab
// report` and `gradlab train --report` call it.
#pragma once

#include <string>

#include "cli/checkpoint_args.h"

namespace gradlab::cli {

// Writes the report of run_dir to out. c holds the prompt flags (--input or --prompt; neither:
// the run's first held-out example) and c.checkpoint the run's best.h5; live lists only the
// sections cheap enough to collect at each evaluation, and makes the page reload itself.
// Returns -1 when written, or the usage exit code after naming a bad prompt.
int write_run_report(const std::string& command, const std::string& run_dir, const std::string& out,
                     const CheckpointArgs& c, bool live);

}  // namespace gradlab::cli
