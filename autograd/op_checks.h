// The registry of gradient checks, one per differentiable op: each entry makes float64 inputs
// whose axes all have different sizes (so a swapped axis cannot hide) and applies the op.
// `gradlab gradcheck` and the test suite both iterate it, so adding an op here adds its row
// to both.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"
#include "autograd/random.h"

namespace gradlab {

struct OpCheck {
  std::string name;
  std::function<std::vector<Tensor>(Generator&)> make_inputs;
  GradcheckFn fn;
  GradcheckOptions options;
};

const std::vector<OpCheck>& op_checks();

}  // namespace gradlab
