// The Fourier analysis of a modular-addition model for Python (interp/fourier.h), as
// `gradlab fourier` computes it: a dict of numpy arrays and numbers.
#include "interp/fourier.h"
#include "python/src/bindings.h"
#include "train/modular_pairs.h"

namespace gradlab::python {
namespace {

py::array_t<double> shaped_doubles(const std::vector<double>& values,
                                   std::vector<py::ssize_t> shape) {
  py::array_t<double> array(shape);
  std::copy(values.begin(), values.end(), array.mutable_data());
  return array;
}

}  // namespace

void bind_fourier(py::module_& m) {
  m.def(
      "fourier",
      [](Checkpoint& c, double share, double neuron_threshold) {
        c.mark_parameters_written();
        interp::FourierAnalysis f;
        try {
          const train::ModularPairBatches pairs = train::modular_pair_batches(c);
          py::gil_scoped_release release;
          f = interp::analyze_fourier(*c.model, {pairs.modulus, pairs.train, pairs.heldout},
                                      {.share = share, .neuron_threshold = neuron_threshold});
        } catch (const ConfigError& e) {
          throw py::value_error(e.what());
        }
        const auto p = static_cast<py::ssize_t>(f.modulus);
        const auto k = static_cast<py::ssize_t>(f.embedding_norms.size());
        const auto n = static_cast<py::ssize_t>(f.neurons.cluster.size());
        py::dict out;
        out["modulus"] = f.modulus;
        out["basis"] = shaped_doubles(f.basis, {p, p});
        out["embedding_norms"] = shaped_doubles(f.embedding_norms, {k});
        out["key_frequencies"] = py::array(py::cast(f.key.frequencies));
        out["key_shares"] =
            shaped_doubles(f.key.shares, {static_cast<py::ssize_t>(f.key.shares.size())});
        out["neuron_shares"] = shaped_doubles(f.neurons.shares, {n, k});
        out["neuron_frequency"] = py::array(py::cast(f.neurons.frequency));
        out["neuron_cluster"] = py::array(py::cast(f.neurons.cluster));
        out["cluster_counts"] = py::array(py::cast(f.neurons.counts));
        out["clustered_fraction"] = f.neurons.clustered_fraction;
        out["logit_norms"] = shaped_doubles(f.logit_norms, {k, k});
        py::dict losses;
        losses["train"] = f.losses.train;
        losses["test"] = f.losses.test;
        losses["restricted"] = f.losses.restricted;
        losses["excluded"] = f.losses.excluded;
        out["losses"] = losses;
        return out;
      },
      py::arg("model"), py::arg("share"), py::arg("neuron_threshold"));
}

}  // namespace gradlab::python
