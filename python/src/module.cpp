// gradlab._native: the extension module the package gradlab wraps. Each file of src/ declares
// one part of the library to Python; this one gathers them.
#include "python/src/bindings.h"

PYBIND11_MODULE(_native, m) {
  m.doc() = "gradlab's C++ engine; use the package gradlab";
  gradlab::python::bind_errors(m);
  gradlab::python::bind_arrays(m);
  gradlab::python::bind_tensor_ops(m);
  gradlab::python::bind_models(m);
  gradlab::python::bind_hooks(m);
  gradlab::python::bind_training(m);
  gradlab::python::bind_instruments(m);
  gradlab::python::bind_circuits(m);
  gradlab::python::bind_fourier(m);
  gradlab::python::bind_interventions(m);
  gradlab::python::bind_sae(m);
  gradlab::python::bind_report(m);
}
