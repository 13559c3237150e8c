// The tms task's own settings (data/tms_task.h): how many features, how many instances trained
// at once, and the density of the sparsest instance.
#pragma once

#include <cstdint>

namespace gradlab::data {

struct TmsOptions {
  int64_t features = 5;       // n
  int64_t instances = 10;     // I
  double min_density = 0.05;  // the last instance's feature probability (the first's is 1)
};

}  // namespace gradlab::data
