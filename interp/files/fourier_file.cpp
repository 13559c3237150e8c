// Writing the Fourier analysis: its HDF5 file, its per-frequency table and a run's curve.
#include "interp/files/fourier_file.h"

#include <cstdio>
#include <map>

#include "interp/files/hdf5/datasets.h"
#include "io/atomic_file.h"

namespace gradlab::interp {
namespace {

void write_float64(H5::H5File& file, const std::string& name, const std::vector<double>& values,
                   std::vector<hsize_t> dims = {}) {
  if (dims.empty()) dims.push_back(values.size());
  file.createDataSet(name, H5::PredType::NATIVE_DOUBLE,
                     H5::DataSpace(static_cast<int>(dims.size()), dims.data()))
      .write(values.data(), H5::PredType::NATIVE_DOUBLE);
}

// %.17g: the doubles read back exactly.
std::string csv_number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

}  // namespace

void write_fourier_file(const std::string& path, const FourierAnalysis& a,
                        const FourierOptions& options, int64_t step) {
  const auto p = static_cast<hsize_t>(a.modulus);
  const auto k = static_cast<hsize_t>(a.embedding_norms.size());
  const auto neurons = static_cast<hsize_t>(a.neurons.frequency.size());
  hdf5::write_file(path, "the Fourier analysis", [&](H5::H5File& file) {
    write_float64(file, "basis", a.basis, {p, p});
    write_float64(file, "embedding_norms", a.embedding_norms);
    hdf5::write_ints(file, "key_frequencies", a.key.frequencies, false);
    write_float64(file, "key_shares", a.key.shares);
    write_float64(file, "neuron_shares", a.neurons.shares, {neurons, k});
    hdf5::write_ints(file, "neuron_frequency", a.neurons.frequency, false);
    hdf5::write_ints(file, "neuron_cluster", a.neurons.cluster, false);
    hdf5::write_ints(file, "cluster_counts", a.neurons.counts, false);
    write_float64(file, "logit_norms", a.logit_norms, {k, k});
    hdf5::write_scalar(file, "modulus", H5::PredType::NATIVE_INT64, &a.modulus);
    hdf5::write_scalar(file, "step", H5::PredType::NATIVE_INT64, &step);
    hdf5::write_scalar(file, "share", H5::PredType::NATIVE_DOUBLE, &options.share);
    hdf5::write_scalar(file, "neuron_threshold", H5::PredType::NATIVE_DOUBLE,
                       &options.neuron_threshold);
    hdf5::write_scalar(file, "clustered_fraction", H5::PredType::NATIVE_DOUBLE,
                       &a.neurons.clustered_fraction);
    hdf5::write_scalar(file, "train_loss", H5::PredType::NATIVE_DOUBLE, &a.losses.train);
    hdf5::write_scalar(file, "test_loss", H5::PredType::NATIVE_DOUBLE, &a.losses.test);
    hdf5::write_scalar(file, "restricted_loss", H5::PredType::NATIVE_DOUBLE, &a.losses.restricted);
    hdf5::write_scalar(file, "excluded_loss", H5::PredType::NATIVE_DOUBLE, &a.losses.excluded);
  });
}

void write_fourier_table(const std::string& path, const FourierAnalysis& a) {
  std::map<int64_t, double> key_share;
  for (size_t i = 0; i < a.key.frequencies.size(); ++i) {
    key_share[a.key.frequencies[i]] = a.key.shares[i];
  }
  const size_t count = a.embedding_norms.size();
  std::string text = "frequency,embedding_norm,key_share,neurons,logit_norm\n";
  for (size_t f = 0; f < count; ++f) {
    const auto found = key_share.find(static_cast<int64_t>(f));
    text += std::to_string(f) + "," + csv_number(a.embedding_norms[f]) + "," +
            csv_number(found == key_share.end() ? 0.0 : found->second) + "," +
            std::to_string(a.neurons.counts[f]) + "," + csv_number(a.logit_norms[f * count + f]) +
            "\n";
  }
  io::replace_file_text(path, text);
}

void write_fourier_curve(const std::string& path, const std::vector<FourierCurvePoint>& points) {
  std::string text = "step,train_loss,test_loss,restricted_loss,excluded_loss,key_frequencies\n";
  for (const FourierCurvePoint& point : points) {
    std::string key;
    for (const int64_t k : point.key_frequencies) {
      if (!key.empty()) key += ' ';
      key += std::to_string(k);
    }
    text += std::to_string(point.step) + "," + csv_number(point.losses.train) + "," +
            csv_number(point.losses.test) + "," + csv_number(point.losses.restricted) + "," +
            csv_number(point.losses.excluded) + "," + key + "\n";
  }
  io::replace_file_text(path, text);
}

}  // namespace gradlab::interp
