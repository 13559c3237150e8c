// A sweep's grid: `--grid KEY=V1,V2,...` axes, read strictly, and the points of their cross
// product times the seeds, each named readably ("lr=3e-4,d-model=64,seed=1") as its run
// directory. Which keys are flags of a run is the caller's to check (the command line asks
// train's option table); the grid only knows text.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gradlab::train {

struct GridAxis {
  std::string key;                  // a flag of `gradlab train` without its dashes: "lr"
  std::vector<std::string> values;  // as typed: "1e-4", "3e-4"
  bool operator==(const GridAxis&) const = default;
};

// "KEY=V1,V2,..." -> an axis. Throws ConfigError quoting text for a missing '=', an empty key,
// a key that is not a flag's name (letters, digits and '-'), an empty value (`lr=`, `lr=1,,2`,
// `lr=1,`) or a value given twice.
GridAxis parse_grid_axis(const std::string& text);

// One run of a sweep: a value for every axis, in the grid's order, and a seed.
struct SweepPoint {
  std::vector<std::pair<std::string, std::string>> values;
  uint64_t seed = 0;
  // "lr=3e-4,d-model=64,seed=1": the run's directory under the sweep's; a byte outside
  // [A-Za-z0-9.+-_] of a value is written %XX, so that a path ("data=a/b.txt") stays one name.
  std::string name() const;
};

// The cross product of the axes (the first axis varying slowest) times seeds 0..seeds-1 (the
// seed slowest of all, so that every configuration gets a first run before any gets a
// second). Throws ConfigError for no seeds, a key on two axes, or an axis keyed "seed" (the
// seeds are counted by --seeds).
std::vector<SweepPoint> sweep_points(const std::vector<GridAxis>& grid, int64_t seeds);

}  // namespace gradlab::train
