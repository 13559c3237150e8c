// gradlab.SAE and gradlab.sae_train: a sparse autoencoder's file, its encoder and decoder on numpy
// arrays, and its training on a checkpoint (interp/sae_run.h), as `gradlab sae train` runs it.
#include <filesystem>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "interp/files/sae_file.h"
#include "interp/sae_run.h"
#include "python/src/bindings.h"

namespace gradlab::python {
namespace {

// fn of a float array as the SAE's dtype, without a graph, as a numpy array.
template <class Fn>
py::array applied(const interp::Sae& sae, const py::handle& array, const std::string& what, Fn fn) {
  const Tensor x = from_numpy(array, what).to(sae.W_dec.dtype());
  py::gil_scoped_release release;
  NoGradGuard no_graph;
  const Tensor out = fn(x);
  py::gil_scoped_acquire acquire;
  return to_numpy(out);
}

std::shared_ptr<interp::Sae> sae_train(Checkpoint& c, const std::string& hook, int64_t d_sae,
                                       const std::string& out, double l1, double lr, int64_t top_k,
                                       int64_t steps, int64_t batch_size, int64_t log_every,
                                       int64_t dead_window, int64_t resample_every, uint64_t seed,
                                       bool overwrite) {
  std::error_code error;
  if (std::filesystem::exists(out, error) && !std::filesystem::is_empty(out, error) && !overwrite) {
    throw FileError(out +
                    " already holds files; pass overwrite=True to replace its sae.h5 and "
                    "metrics.csv");
  }
  c.mark_parameters_written();
  py::gil_scoped_release release;
  return interp::train_sae_on_checkpoint(
      c, {.hook = hook, .d_sae = d_sae, .l1_coefficient = l1, .top_k = top_k, .seed = seed},
      {.steps = steps,
       .lr = lr,
       .log_every = log_every,
       .dead_window = dead_window,
       .resample_every = resample_every},
      batch_size, out, nullptr);
}

}  // namespace

void bind_sae(py::module_& m) {
  using interp::Sae;
  py::class_<Sae, std::shared_ptr<Sae>>(m, "SAE")
      .def_static("load", &interp::read_sae_file, py::arg("path"),
                  "the SAE in a file that gradlab sae train wrote")
      .def("save", [](const Sae& s, const std::string& path) { interp::write_sae_file(path, s); })
      .def_property_readonly("hook", [](const Sae& s) { return s.config().hook; })
      .def_property_readonly("d_in", [](const Sae& s) { return s.config().d_in; })
      .def_property_readonly("d_sae", [](const Sae& s) { return s.config().d_sae; })
      .def_property_readonly("l1_coefficient",
                             [](const Sae& s) { return s.config().l1_coefficient; })
      .def_property_readonly("top_k", [](const Sae& s) { return s.config().top_k; })
      .def_property_readonly("checkpoint", [](const Sae& s) { return s.config().checkpoint; })
      .def_property_readonly("W_enc", [](const Sae& s) { return to_numpy(s.W_enc); })
      .def_property_readonly("b_enc", [](const Sae& s) { return to_numpy(s.b_enc); })
      .def_property_readonly("W_dec", [](const Sae& s) { return to_numpy(s.W_dec); })
      .def_property_readonly("b_dec", [](const Sae& s) { return to_numpy(s.b_dec); })
      .def(
          "encode",
          [](const Sae& s, const py::handle& x) {
            return applied(s, x, "x", [&](const Tensor& t) { return s.encode(t); });
          },
          py::arg("x"), "features f [N, d_sae] of inputs x [N, d_in]")
      .def(
          "decode",
          [](const Sae& s, const py::handle& f) {
            return applied(s, f, "features", [&](const Tensor& t) { return s.decode(t); });
          },
          py::arg("features"), "x_hat [N, d_in] of features [N, d_sae]")
      .def(
          "reconstruct",
          [](const Sae& s, const py::handle& x) {
            return applied(s, x, "x", [&](const Tensor& t) { return s.reconstruct(t); });
          },
          py::arg("x"), "x_hat of x [..., d_in]: what --intervene POINT=sae:FILE splices in");
  m.def("sae_train", &sae_train, py::arg("model"), py::arg("hook"), py::arg("d_sae"),
        py::arg("out"), py::arg("l1") = 1.0, py::arg("lr") = 3e-4, py::arg("top_k") = 0,
        py::arg("steps") = 1000, py::arg("batch_size") = 0, py::arg("log_every") = 100,
        py::arg("dead_window") = 1000, py::arg("resample_every") = 2000, py::arg("seed") = 0,
        py::arg("overwrite") = false);
}

}  // namespace gradlab::python
