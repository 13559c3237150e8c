// Weight-based circuits for Python (interp/circuits.h): FactoredMatrix with TransformerLens's
// names (A, B, AB, BA, T, norm(), svd(), S, eigenvalues, @), a model's heads as factored W_QK and
// W_OV with its W_E and W_U, and the report of `gradlab circuits` as numpy arrays.
#include <pybind11/eigen.h>

#include "interp/circuits.h"
#include "python/src/bindings.h"

namespace gradlab::python {
namespace {

using interp::FactoredMatrix;

// values (row-major) as a float64 array of the given shape.
py::array_t<double> shaped(const std::vector<double>& values, std::vector<py::ssize_t> shape) {
  py::array_t<double> array(shape);
  std::copy(values.begin(), values.end(), array.mutable_data());
  return array;
}

py::list per_head(const interp::ModelCircuits& circuits,
                  std::vector<FactoredMatrix> interp::AttentionCircuits::*kind) {
  py::list layers;
  for (const interp::AttentionCircuits& attention : circuits.attentions) {
    layers.append(py::cast(attention.*kind));
  }
  return layers;
}

void bind_factored_matrix(py::module_& m) {
  py::class_<FactoredMatrix> factored(m, "FactoredMatrix");
  // numpy then leaves `array @ factored` to __rmatmul__ instead of failing on it.
  factored.attr("__array_ufunc__") = py::none();
  factored.def(py::init<Eigen::MatrixXd, Eigen::MatrixXd>(), py::arg("A"), py::arg("B"))
      .def_property_readonly("A", &FactoredMatrix::A)
      .def_property_readonly("B", &FactoredMatrix::B)
      .def_property_readonly("AB", &FactoredMatrix::AB)
      .def_property_readonly("BA", &FactoredMatrix::BA)
      .def_property_readonly("T", &FactoredMatrix::transpose)
      .def_property_readonly(
          "shape", [](const FactoredMatrix& f) { return py::make_tuple(f.rows(), f.cols()); })
      .def_property_readonly("ldim", &FactoredMatrix::rows)
      .def_property_readonly("mdim", &FactoredMatrix::inner)
      .def_property_readonly("rdim", &FactoredMatrix::cols)
      .def("norm", &FactoredMatrix::norm)
      .def("svd",
           [](const FactoredMatrix& f) {
             interp::Svd s = f.svd();
             return py::make_tuple(std::move(s.U), std::move(s.S), std::move(s.V));
           })
      .def_property_readonly("S", &FactoredMatrix::singular_values)
      .def_property_readonly("eigenvalues", &FactoredMatrix::eigenvalues)
      .def("reduced", &FactoredMatrix::reduced, py::arg("rank"))
      .def("__matmul__", [](const FactoredMatrix& f, const FactoredMatrix& g) { return f * g; })
      .def("__matmul__",
           [](const FactoredMatrix& f, const Eigen::MatrixXd& right) { return f * right; })
      .def("__rmatmul__",
           [](const FactoredMatrix& f, const Eigen::MatrixXd& left) { return left * f; })
      .def("__repr__", [](const FactoredMatrix& f) {
        return "FactoredMatrix: shape (" + std::to_string(f.rows()) + ", " +
               std::to_string(f.cols()) + "), hidden dim " + std::to_string(f.inner());
      });
}

}  // namespace

void bind_circuits(py::module_& m) {
  bind_factored_matrix(m);
  m.def(
      "circuit_matrices",
      [](const Checkpoint& c) {
        const interp::ModelCircuits circuits = interp::model_circuits(*c.model);
        py::dict out;
        py::list names;
        for (const interp::AttentionCircuits& a : circuits.attentions) names.append(a.name);
        out["attentions"] = names;
        out["QK"] = per_head(circuits, &interp::AttentionCircuits::qk);
        out["OV"] = per_head(circuits, &interp::AttentionCircuits::ov);
        out["W_E"] = circuits.embedding;
        out["W_U"] = circuits.unembedding;
        return out;
      },
      py::arg("model"));
  m.def(
      "circuits",
      [](const Checkpoint& c, const interp::CircuitOptions& options) {
        interp::CircuitReport r;
        {
          py::gil_scoped_release release;
          r = interp::circuit_report(*c.model, options);
        }
        const py::ssize_t L = static_cast<py::ssize_t>(r.attentions.size()), H = r.heads,
                          D = r.head_dim;
        py::dict out;
        out["attentions"] = r.attentions;
        out["ov_norm"] = shaped(r.ov_norm, {L, H});
        out["qk_norm"] = shaped(r.qk_norm, {L, H});
        out["ov_singular_values"] = shaped(r.ov_singular_values, {L, H, D});
        out["qk_singular_values"] = shaped(r.qk_singular_values, {L, H, D});
        out["copying_score"] = shaped(r.copying_score, {L, H});
        out["diagonal_top1"] = shaped(r.diagonal_top1, {L, H});
        out["diagonal_mean_rank"] = shaped(r.diagonal_mean_rank, {L, H});
        for (size_t k = 0; k < interp::kCompositions.size(); ++k) {
          const std::string name = interp::composition_name(interp::kCompositions[k]);
          out[py::str("composition_" + name)] = shaped(r.composition[k], {L * H, L * H});
          out[py::str("baseline_" + name)] = r.baseline[k];
        }
        return out;
      },
      py::arg("model"), py::arg("options"));
  py::class_<interp::CircuitOptions>(m, "CircuitOptions")
      .def(py::init<>())
      .def_readwrite("baseline_draws", &interp::CircuitOptions::baseline_draws)
      .def_readwrite("seed", &interp::CircuitOptions::seed);
}

}  // namespace gradlab::python
