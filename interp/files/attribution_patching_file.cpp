// Writing the results of attribution patching to HDF5.
#include "interp/files/attribution_patching_file.h"

#include <algorithm>
#include <limits>

#include "interp/files/hdf5/datasets.h"

namespace gradlab::interp {
namespace {

void write_doubles(H5::H5File& file, const std::string& name, const std::vector<double>& values,
                   const std::vector<hsize_t>& dims) {
  file.createDataSet(name, H5::PredType::NATIVE_DOUBLE,
                     H5::DataSpace(static_cast<int>(dims.size()), dims.data()))
      .write(values.data(), H5::PredType::NATIVE_DOUBLE);
}

// The rows side by side: [R, P], NaN past a row's end, as a patching file's /scores.
void write_rows(H5::H5File& file, const std::vector<std::vector<double>>& rows) {
  size_t width = 1;
  for (const auto& row : rows) width = std::max(width, row.size());
  std::vector<double> scores(rows.size() * width, std::numeric_limits<double>::quiet_NaN());
  for (size_t r = 0; r < rows.size(); ++r) {
    std::copy(rows[r].begin(), rows[r].end(), scores.begin() + r * width);
  }
  write_doubles(file, "scores", scores, {rows.size(), width});
}

}  // namespace

void write_attribution_patching_file(const std::string& path,
                                     const AttributionPatchingResults& results) {
  const PatchingResults& r = results.estimates;
  hdf5::write_file(path, "the attribution patching results", [&](H5::H5File& file) {
    hdf5::write_ints(file, "clean_inputs", r.clean.inputs.values, false);
    hdf5::write_ints(file, "corrupt_inputs", r.corrupt.inputs.values, false);
    if (!r.clean.source.shape.empty()) {
      hdf5::write_ints(file, "clean_source", r.clean.source.values, false);
      hdf5::write_ints(file, "corrupt_source", r.corrupt.source.values, false);
    }
    hdf5::write_ints(file, "clean_answer", r.clean_answer, false);
    hdf5::write_ints(file, "corrupt_answer", r.corrupt_answer, false);
    hdf5::write_strings(file, "rows", r.rows);
    hdf5::write_strings(file, "row_axes", r.row_axes);
    write_rows(file, r.scores);
    hdf5::write_scalar(file, "clean_logit_difference", H5::PredType::NATIVE_DOUBLE,
                       &r.clean_difference);
    hdf5::write_scalar(file, "corrupt_logit_difference", H5::PredType::NATIVE_DOUBLE,
                       &r.corrupt_difference);
    const hsize_t k = results.top_rows.size();
    hdf5::write_strings(file, "top_rows", results.top_rows);
    hdf5::write_ints(file, "top_positions", results.top_positions, false);
    write_doubles(file, "top_attribution", results.top_attribution, {k});
    write_doubles(file, "top_exact", results.top_exact, {k});
    hdf5::write_scalar(file, "correlation", H5::PredType::NATIVE_DOUBLE, &results.correlation);
  });
}

}  // namespace gradlab::interp
