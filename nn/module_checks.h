// The registry of module gradient checks: each builds a small module in float64 with random
// parameters, all axis sizes different, and checks the gradient of every parameter and input.
// `gradlab gradcheck` lists these after the op checks; the test suite runs them all.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"

namespace gradlab::nn {

struct ModuleCheck {
  std::string name;
  std::string sizes;  // the configuration, for the table
  std::function<GradcheckReport(uint64_t seed)> run;
};

const std::vector<ModuleCheck>& module_checks();

}  // namespace gradlab::nn
