// Writing direct logit attribution to HDF5.
#include "interp/files/dla_file.h"

#include "interp/files/hdf5/datasets.h"

namespace gradlab::interp {
namespace {

void write_doubles(H5::H5File& file, const std::string& name, const std::vector<double>& values) {
  const hsize_t dims[1] = {values.size()};
  file.createDataSet(name, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(1, dims))
      .write(values.data(), H5::PredType::NATIVE_DOUBLE);
}

}  // namespace

void write_dla_file(const std::string& path, const DlaSummary& summary, const DlaOptions& options,
                    const nn::SequenceBatch* prompt, const std::vector<int64_t>& answer) {
  hdf5::write_file(path, "direct logit attribution", [&](H5::H5File& file) {
    if (prompt) hdf5::write_tokens(file, *prompt, answer);
    hdf5::write_strings(file, "labels", summary.labels);
    write_doubles(file, "mean", summary.mean);
    write_doubles(file, "std", summary.std);
    hdf5::write_scalar(file, "rows", H5::PredType::NATIVE_INT64, &summary.rows);
    hdf5::write_scalar(file, "position", H5::PredType::NATIVE_INT64, &options.position);
    hdf5::write_scalar(file, "answer_token", H5::PredType::NATIVE_INT64, &options.answer);
    hdf5::write_scalar(file, "versus_token", H5::PredType::NATIVE_INT64, &options.versus);
    hdf5::write_scalar(file, "logit_mean", H5::PredType::NATIVE_DOUBLE, &summary.logit_mean);
  });
}

}  // namespace gradlab::interp
