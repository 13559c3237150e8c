// Numerical gradient checking: analytic gradients from backward() against central differences
// in float64, as torch.autograd.gradcheck does.
//
// The output is reduced to a scalar L = sum(fn(inputs) * W) with a fixed random W, so one
// backward pass gives every input's gradient and a wrong entry anywhere in the Jacobian shows
// up (a random W cannot cancel it except with probability zero).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace gradlab {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 0;  // for W, and for the elements drawn when elements_per_tensor is set
  // 0: every element of every tensor. Otherwise at most this many elements of each tensor: the
  // first, the last and the rest drawn at random. For checks of whole models, whose layers'
  // own checks cover every element: a wrong wiring between them (a swapped axis, a residual
  // to the wrong place) shows in nearly every element, so a sample finds it.
  int64_t elements_per_tensor = 0;
};

struct InputReport {
  Shape shape;
  double max_abs_error = 0;
  // |analytic - numeric| / max(|analytic|, |numeric|), over elements where that scale exceeds
  // atol: for gradients near zero the ratio measures rounding noise, not a wrong gradient.
  double max_rel_error = 0;
  int64_t worst_index = -1;  // flat index of the element with the largest absolute error
  bool passed = true;
};

struct GradcheckReport {
  std::vector<InputReport> inputs;
  // The ops in the graph of the function checked (ops_in_graph, op_registry.h): those whose
  // backward the check exercised.
  std::vector<std::string> ops;
  bool passed() const;
  double max_abs_error() const;
  double max_rel_error() const;
};

using GradcheckFn = std::function<Tensor(const std::vector<Tensor>&)>;

// Checks d fn / d inputs[i] for every input. Inputs are copied to float64 and marked as
// requiring grad; the originals are untouched. An element passes when
// |analytic - numeric| <= atol + rtol * |numeric|.
GradcheckReport gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options = {});

// Checks d fn() / d t for every t in wrt: float64 leaves that fn reads, such as the parameters
// of a module moved to float64. They are perturbed in place and restored; their grads are reset.
GradcheckReport gradcheck_tensors(const std::function<Tensor()>& fn, const std::vector<Tensor>& wrt,
                                  const GradcheckOptions& options = {});

// "max abs 1.2e-10, max rel 3.4e-08 (input 1 [2,3] element 4)" or the failure's details.
std::string describe(const GradcheckReport& report);

}  // namespace gradlab
