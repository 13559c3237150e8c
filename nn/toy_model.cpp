// The toy model of superposition and the geometry of its features.
#include "nn/toy_model.h"

#include <cmath>
#include <numbers>

#include "autograd/ops.h"

namespace gradlab::nn {
namespace {

constexpr double kImportanceDecay = 0.9;

}  // namespace

ToyModel::ToyModel(const ModelConfig& config) : SequenceModel(config) {
  const int64_t instances = config.max_len, dims = config.d_model, features = config.vocab_size;
  if (instances < 1 || dims < 1 || features < 1) {
    throw ConfigError("tms: instances, dimensions and features must be >= 1, got I = " +
                      std::to_string(instances) + ", m = " + std::to_string(dims) +
                      ", n = " + std::to_string(features));
  }
  Generator gen(config.seed);
  // Xavier normal over each instance's [m, n] matrix; the bias starts at zero.
  const double stddev = std::sqrt(2.0 / static_cast<double>(dims + features));
  weight = register_parameter(
      "W", Tensor::randn({instances, dims, features}, gen, DType::Float32, 0.0, stddev));
  bias = register_parameter("b", Tensor::zeros({instances, features}));
}

Tensor ToyModel::reconstruct(const Tensor& features) const {
  const Shape& w = weight.shape();
  if (features.rank() != 3 || features.size(1) != w[0] || features.size(2) != w[2]) {
    throw ShapeError("tms: features " + to_string(features.shape()) +
                     " are not [B, I, n] for weight " + to_string(w) + " [I, m, n]");
  }
  const Tensor x = permute(features, {1, 0, 2});                          // [I, B, n]
  const Tensor h = matmul(x, transpose(weight, 1, 2));                    // [I, B, m]
  const Tensor out = matmul(h, weight) + reshape(bias, {w[0], 1, w[2]});  // [I, B, n]
  return permute(relu(out), {1, 0, 2});                                   // [B, I, n]
}

Tensor ToyModel::forward(const SequenceBatch& batch, AttentionMaps*) const {
  return reconstruct(batch.features);
}

Tensor ToyModel::loss(const SequenceBatch& batch) const {
  const Tensor error = reconstruct(batch.features) - batch.features;  // [B, I, n]
  const Tensor weighted = error * error * importance();
  return sum(mean(sum(weighted, {2}), {0}));
}

Tensor ToyModel::importance() const {
  const int64_t features = weight.size(2);
  std::vector<double> values(static_cast<size_t>(features));
  for (int64_t i = 0; i < features; ++i) values[i] = std::pow(kImportanceDecay, i);
  return Tensor::from_vector(values, {features}, weight.dtype());
}

FeatureGeometry feature_geometry(const Tensor& weight) {
  if (weight.rank() != 3) {
    throw ShapeError("feature_geometry: weight " + to_string(weight.shape()) + " is not [I, m, n]");
  }
  FeatureGeometry g{weight.size(0), weight.size(2), weight.size(1), {}, {}, {}};
  const std::vector<double> w = weight.to_vector();
  const int64_t m = g.dims, n = g.features;
  // Column i of instance j: w[(j * m + d) * n + i] for d in [0, m).
  for (int64_t j = 0; j < g.instances; ++j) {
    const auto at = [&](int64_t d, int64_t i) { return w[(j * m + d) * n + i]; };
    const auto dot = [&](int64_t a, int64_t b) {
      double s = 0;
      for (int64_t d = 0; d < m; ++d) s += at(d, a) * at(d, b);
      return s;
    };
    for (int64_t i = 0; i < n; ++i) {
      const double squared = dot(i, i);
      double interference = 0;
      for (int64_t k = 0; k < n; ++k) interference += dot(i, k) * dot(i, k);
      g.norms.push_back(std::sqrt(squared));
      // sum_k (W_i_hat . W_k)^2 = sum_k (W_i . W_k)^2 / ||W_i||^2.
      g.dimensionality.push_back(squared > 0 ? squared * squared / interference : 0.0);
      if (m == 2) {
        const double degrees = std::atan2(at(1, i), at(0, i)) * 180.0 / std::numbers::pi;
        g.angles.push_back(degrees < 0 ? degrees + 360.0 : degrees);
      }
    }
  }
  return g;
}

}  // namespace gradlab::nn
