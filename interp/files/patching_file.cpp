// Writing the results of activation patching to HDF5.
#include "interp/files/patching_file.h"

#include <algorithm>
#include <limits>

#include "interp/files/hdf5/datasets.h"

namespace gradlab::interp {
namespace {

// The rows side by side: [R, P], NaN past a row's end.
void write_scores(H5::H5File& file, const std::vector<std::vector<double>>& rows) {
  size_t width = 1;
  for (const auto& row : rows) width = std::max(width, row.size());
  std::vector<double> scores(rows.size() * width, std::numeric_limits<double>::quiet_NaN());
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy(rows[r].begin(), rows[r].end(), scores.begin() + r * width);
  }
  const hsize_t dims[2] = {rows.size(), width};
  file.createDataSet("scores", H5::PredType::NATIVE_DOUBLE, H5::DataSpace(2, dims))
      .write(scores.data(), H5::PredType::NATIVE_DOUBLE);
}

}  // namespace

void write_patching_file(const std::string& path, const PatchingResults& results) {
  hdf5::write_file(path, "the patching results", [&](H5::H5File& file) {
    hdf5::write_ints(file, "clean_inputs", results.clean.inputs.values, false);
    hdf5::write_ints(file, "corrupt_inputs", results.corrupt.inputs.values, false);
    if (!results.clean.source.shape.empty()) {
      hdf5::write_ints(file, "clean_source", results.clean.source.values, false);
      hdf5::write_ints(file, "corrupt_source", results.corrupt.source.values, false);
    }
    hdf5::write_ints(file, "clean_answer", results.clean_answer, false);
    hdf5::write_ints(file, "corrupt_answer", results.corrupt_answer, false);
    hdf5::write_strings(file, "rows", results.rows);
    hdf5::write_strings(file, "row_axes", results.row_axes);
    write_scores(file, results.scores);
    hdf5::write_scalar(file, "clean_logit_difference", H5::PredType::NATIVE_DOUBLE,
                       &results.clean_difference);
    hdf5::write_scalar(file, "corrupt_logit_difference", H5::PredType::NATIVE_DOUBLE,
                       &results.corrupt_difference);
  });
}

}  // namespace gradlab::interp
