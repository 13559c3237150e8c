// The random draws, comparisons and where of autograd/ on gradlab.Tensor: a Generator seeded as
// the library's (the same seed draws the same numbers as in C++), bernoulli, rand_like and
// randn_like from it, the six comparisons against a tensor or a number, and where.
#include "autograd/compare.h"
#include "autograd/index.h"
#include "autograd/sampling.h"
#include "python/src/bindings.h"

namespace gradlab::python {
namespace {

using TensorOp = Tensor (*)(const Tensor&, const Tensor&);
using NumberOp = Tensor (*)(const Tensor&, double);

// A comparison, against a Tensor or a number (a Python float or int).
void bind_comparison(py::module_& m, const char* name, TensorOp with_tensor, NumberOp with_number,
                     const char* doc) {
  m.def(name, with_tensor, py::arg("a"), py::arg("b"), doc);
  m.def(name, with_number, py::arg("a"), py::arg("b"), doc);
}

}  // namespace

void bind_tensor_ops(py::module_& m) {
  py::class_<Generator>(m, "Generator",
                        "A seeded random generator: the same seed draws the same numbers")
      .def(py::init<uint64_t>(), py::arg("seed") = 0);
  m.def("bernoulli", &bernoulli, py::arg("probabilities"), py::arg("generator"),
        "1 with probability p, else 0, for each element p (in [0, 1]); no graph");
  m.def("rand_like", &rand_like, py::arg("like"), py::arg("generator"), py::arg("low") = 0.0,
        py::arg("high") = 1.0, "uniform in [low, high), like's shape and dtype; no graph");
  m.def("randn_like", &randn_like, py::arg("like"), py::arg("generator"), py::arg("mean") = 0.0,
        py::arg("stddev") = 1.0, "normal, like's shape and dtype; no graph");
  bind_comparison(m, "greater", &greater, &greater, "1 where a > b, else 0 (broadcast)");
  bind_comparison(m, "greater_equal", &greater_equal, &greater_equal,
                  "1 where a >= b, else 0 (broadcast)");
  bind_comparison(m, "less", &less, &less, "1 where a < b, else 0 (broadcast)");
  bind_comparison(m, "less_equal", &less_equal, &less_equal, "1 where a <= b, else 0 (broadcast)");
  bind_comparison(m, "equal", &equal, &equal, "1 where a == b, else 0 (broadcast)");
  bind_comparison(m, "not_equal", &not_equal, &not_equal, "1 where a != b, else 0 (broadcast)");
  m.def("where", py::overload_cast<const Tensor&, const Tensor&, const Tensor&>(&where),
        py::arg("condition"), py::arg("a"), py::arg("b"),
        "a where condition is nonzero, else b (broadcast together)");
}

}  // namespace gradlab::python
