// A sweep's runs as child processes, a few at a time: each `program args...` with its output
// appended to a log file, and a clean stop of them all when the sweep is asked to stop.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gradlab::train {

struct ChildRun {
  std::vector<std::string> args;  // after the program's name
  std::string log;                // stdout and stderr appended here (its directory must exist)
};

// Runs program with each run's arguments, at most `jobs` at once, in order, and calls
// ended(index, exit code) as each ends (-1 when a signal ended it). While it runs, SIGINT and
// SIGTERM stop the sweep cleanly: no further run starts, each running child gets SIGTERM once
// (a gradlab train saves a checkpoint and stops), and the call waits for them. The children
// run in process groups of their own, so that a terminal's Ctrl-C reaches them only this way,
// once. Returns false when a signal stopped it. Throws FileError naming the log or the program
// when a child cannot be started.
bool run_children(const std::string& program, const std::vector<ChildRun>& runs, int64_t jobs,
                  const std::function<void(size_t index, int exit_code)>& ended);

}  // namespace gradlab::train
