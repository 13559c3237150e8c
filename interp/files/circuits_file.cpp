// Writing a model's circuit report to HDF5.
#include "interp/files/circuits_file.h"

#include "interp/files/hdf5/datasets.h"

namespace gradlab::interp {
namespace {

void write_doubles(H5::H5File& file, const std::string& name, const std::vector<double>& values,
                   const std::vector<hsize_t>& dims) {
  file.createDataSet(name, H5::PredType::NATIVE_DOUBLE,
                     H5::DataSpace(static_cast<int>(dims.size()), dims.data()))
      .write(values.data(), H5::PredType::NATIVE_DOUBLE);
}

}  // namespace

void write_circuits_file(const std::string& path, const CircuitReport& report,
                         const CircuitOptions& options) {
  const hsize_t L = report.attentions.size(), H = static_cast<hsize_t>(report.heads);
  const hsize_t D = static_cast<hsize_t>(report.head_dim);
  hdf5::write_file(path, "circuits", [&](H5::H5File& file) {
    write_doubles(file, "ov_norm", report.ov_norm, {L, H});
    write_doubles(file, "qk_norm", report.qk_norm, {L, H});
    write_doubles(file, "copying_score", report.copying_score, {L, H});
    write_doubles(file, "diagonal_top1", report.diagonal_top1, {L, H});
    write_doubles(file, "diagonal_mean_rank", report.diagonal_mean_rank, {L, H});
    write_doubles(file, "ov_singular_values", report.ov_singular_values, {L, H, D});
    write_doubles(file, "qk_singular_values", report.qk_singular_values, {L, H, D});
    file.createGroup("composition");
    for (size_t k = 0; k < kCompositions.size(); ++k) {
      write_doubles(file, std::string("composition/") + composition_name(kCompositions[k]),
                    report.composition[k], {L * H, L * H});
    }
    write_doubles(file, "baseline", {report.baseline.begin(), report.baseline.end()}, {3});
    hdf5::write_strings(file, "attentions", report.attentions);
    hdf5::write_scalar(file, "baseline_draws", H5::PredType::NATIVE_INT64, &options.baseline_draws);
    hdf5::write_scalar(file, "seed", H5::PredType::NATIVE_UINT64, &options.seed);
  });
}

}  // namespace gradlab::interp
