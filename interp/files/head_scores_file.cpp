// Writing the previous-token, duplicate-token and induction scores of every head to HDF5.
#include "interp/files/head_scores_file.h"

#include "autograd/error.h"
#include "interp/files/hdf5/datasets.h"

namespace gradlab::interp {
namespace {

// One score kind of every point: [L, H].
void write_score_table(H5::H5File& file, const std::string& name,
                       const std::vector<LayerHeadScores>& scores,
                       std::vector<double> LayerHeadScores::*kind) {
  std::vector<double> values;
  for (const LayerHeadScores& point : scores) {
    values.insert(values.end(), (point.*kind).begin(), (point.*kind).end());
  }
  const hsize_t dims[2] = {scores.size(), scores.empty() ? 0 : (scores[0].*kind).size()};
  file.createDataSet(name, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(2, dims))
      .write(values.data(), H5::PredType::NATIVE_DOUBLE);
}

}  // namespace

void write_head_scores_file(const std::string& path, const std::vector<LayerHeadScores>& scores,
                            const HeadScoreOptions& options) {
  for (const LayerHeadScores& point : scores) {
    if (point.induction.size() != scores[0].induction.size()) {
      throw ShapeError(path + ": " + point.point + " has " +
                       std::to_string(point.induction.size()) + " heads and " + scores[0].point +
                       " " + std::to_string(scores[0].induction.size()) +
                       "; the score tables are [points, heads]");
    }
  }
  hdf5::write_file(path, "head scores", [&](H5::H5File& file) {
    write_score_table(file, "previous_token", scores, &LayerHeadScores::previous_token);
    write_score_table(file, "duplicate_token", scores, &LayerHeadScores::duplicate_token);
    write_score_table(file, "induction", scores, &LayerHeadScores::induction);
    std::vector<std::string> points;
    for (const LayerHeadScores& point : scores) points.push_back(point.point);
    hdf5::write_strings(file, "points", points);
    hdf5::write_scalar(file, "length", H5::PredType::NATIVE_INT64, &options.length);
    hdf5::write_scalar(file, "sequences", H5::PredType::NATIVE_INT64, &options.sequences);
    hdf5::write_scalar(file, "seed", H5::PredType::NATIVE_UINT64, &options.seed);
  });
}

}  // namespace gradlab::interp
