// DIR/sweep.json: what a sweep is (the base config file, the flags every run shares, the threads
// of each run, the grid and the seeds), the runs it makes, and the runs that failed. Written
// before the first run starts and rewritten whole (atomically) as runs fail; read back by a
// sweep run again over the same directory, to resume it, and by `gradlab report`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/sweep/grid.h"

namespace gradlab::train {

struct SweepSpec {
  std::string config;              // --config BASE.ini as given ("" for none)
  std::vector<std::string> flags;  // the train flags every run shares, as given: "--steps", "20"
  int64_t threads = 1;             // --threads of each run
  std::vector<GridAxis> grid;
  int64_t seeds = 1;
  std::vector<std::string> failed;  // names of the runs that exited with an error
};

// The file's text: the spec, and a "runs" list (name, seed, values) of sweep_points for the
// reader's convenience.
std::string sweep_json(const SweepSpec& spec);

// Reads a sweep.json (the spec; "runs" is derived and not read). Throws ConfigError naming path
// and what is wrong for a file that is not one.
SweepSpec read_sweep_json(const std::string& path);

// Whether `now` may run over the directory `before` was written for: the same sweep (threads
// and the failed runs aside), or, with extend, one whose grid has the same keys and every
// value it had, at least as many seeds, and the same config and flags. Throws ConfigError
// saying what changed.
void check_same_sweep(const SweepSpec& before, const SweepSpec& now, bool extend);

}  // namespace gradlab::train
