// Reading `--grid` axes and naming the points of a sweep (grid.h).
#include "train/sweep/grid.h"

#include <algorithm>
#include <cstdio>

#include "autograd/error.h"
#include "autograd/format.h"

namespace gradlab::train {
namespace {

bool key_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

bool name_character(char c) {
  return key_character(c) || c == '.' || c == '+' || c == '_';
}

std::string escaped(const std::string& value) {
  std::string out;
  for (const char c : value) {
    if (name_character(c)) {
      out += c;
    } else {
      char code[4];
      std::snprintf(code, sizeof code, "%%%02X", static_cast<unsigned char>(c));
      out += code;
    }
  }
  return out;
}

}  // namespace

GridAxis parse_grid_axis(const std::string& text) {
  const std::string form = "--grid " + quote(text) + ": ";
  const size_t equals = text.find('=');
  if (equals == std::string::npos) {
    throw ConfigError(form + "expected KEY=V1,V2,... (a flag of gradlab train and its values)");
  }
  GridAxis axis;
  axis.key = text.substr(0, equals);
  if (axis.key.starts_with("--")) axis.key.erase(0, 2);
  if (axis.key.empty()) throw ConfigError(form + "no key before '='");
  if (!std::all_of(axis.key.begin(), axis.key.end(), key_character)) {
    throw ConfigError(form + "the key " + quote(axis.key) + " is not the name of a flag");
  }
  const std::string list = text.substr(equals + 1);
  size_t start = 0;
  while (true) {
    const size_t comma = list.find(',', start);
    const std::string value = list.substr(start, comma - start);
    if (value.empty()) {
      throw ConfigError(form + "an empty value (values are separated by single commas)");
    }
    if (std::find(axis.values.begin(), axis.values.end(), value) != axis.values.end()) {
      throw ConfigError(form + "the value " + quote(value) + " is given twice");
    }
    axis.values.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return axis;
}

std::string SweepPoint::name() const {
  std::string out;
  for (const auto& [key, value] : values) out += key + "=" + escaped(value) + ",";
  return out + "seed=" + std::to_string(seed);
}

std::vector<SweepPoint> sweep_points(const std::vector<GridAxis>& grid, int64_t seeds) {
  if (seeds < 1) throw ConfigError("--seeds " + std::to_string(seeds) + ": must be at least 1");
  for (size_t i = 0; i < grid.size(); ++i) {
    if (grid[i].key == "seed") {
      throw ConfigError("--grid seed=...: the seeds are counted by --seeds N (seeds 0 to N-1)");
    }
    for (size_t j = 0; j < i; ++j) {
      if (grid[j].key == grid[i].key) {
        throw ConfigError("--grid " + grid[i].key + "=...: the key is on two --grid axes");
      }
    }
  }
  std::vector<SweepPoint> points;
  for (int64_t seed = 0; seed < seeds; ++seed) {
    std::vector<size_t> at(grid.size(), 0);  // the value index of each axis, an odometer
    while (true) {
      SweepPoint point;
      point.seed = static_cast<uint64_t>(seed);
      for (size_t a = 0; a < grid.size(); ++a) {
        point.values.emplace_back(grid[a].key, grid[a].values[at[a]]);
      }
      points.push_back(std::move(point));
      size_t a = grid.size();
      while (a > 0 && ++at[a - 1] == grid[a - 1].values.size()) at[--a] = 0;
      if (a == 0) break;
    }
  }
  return points;
}

}  // namespace gradlab::train
