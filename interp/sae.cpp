// The sparse autoencoder's forward pass, loss and decoder constraint.
#include "interp/sae.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"
#include "autograd/matmul.h"
#include "autograd/ops.h"
#include "autograd/random.h"
#include "autograd/shape_ops.h"
#include "train/fingerprint.h"

namespace gradlab::interp {
namespace {

// The 2-norm of each row of matrix [R, C], as [R] (in the graph: the L1 term differentiates it).
Tensor row_norms(const Tensor& matrix) {
  return sqrt(sum(matrix * matrix, {1}));
}

// 1 at the k largest entries of each row of values [N, F] (the first on a tie), else 0.
Tensor top_k_mask(const Tensor& values, int64_t k) {
  const int64_t rows = values.size(0), width = values.size(1);
  const std::vector<double> v = values.to_vector();
  std::vector<double> mask(v.size(), 0.0);
  std::vector<int64_t> order(static_cast<size_t>(width));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = v.data() + r * width;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int64_t i = 0; i < k; ++i) mask[static_cast<size_t>(r * width + order[i])] = 1.0;
  }
  return Tensor::from_vector(mask, values.shape(), values.dtype());
}

}  // namespace

void check_sae_config(const SaeConfig& c) {
  if (c.d_in < 1) throw ConfigError("sae: d_in " + format_number(c.d_in) + " must be at least 1");
  if (c.d_sae < 1) {
    throw ConfigError("sae: d_sae " + format_number(c.d_sae) + " must be at least 1");
  }
  if (!std::isfinite(c.l1_coefficient) || c.l1_coefficient < 0) {
    throw ConfigError("sae: l1_coefficient " + format_number(c.l1_coefficient) +
                      " must be finite and >= 0");
  }
  if (c.top_k < 0 || c.top_k > c.d_sae) {
    throw ConfigError("sae: top_k " + format_number(c.top_k) + " must be in [0, d_sae " +
                      format_number(c.d_sae) + "]");
  }
}

Sae::Sae(const SaeConfig& config) : config_(config) {
  check_sae_config(config);
  Generator gen(config.seed);
  Tensor decoder = Tensor::randn({config.d_sae, config.d_in}, gen);
  {
    NoGradGuard no_grad;
    decoder = decoder / reshape(row_norms(decoder), {config.d_sae, 1});
  }
  W_enc = register_parameter("W_enc", transpose(decoder, 0, 1).to(DType::Float32));
  b_enc = register_parameter("b_enc", Tensor::zeros({config.d_sae}));
  W_dec = register_parameter("W_dec", decoder.to(DType::Float32));
  b_dec = register_parameter("b_dec", Tensor::zeros({config.d_in}));
}

Tensor Sae::encode(const Tensor& x) const {
  if (x.rank() != 2 || x.size(1) != config_.d_in) {
    throw ShapeError("sae encode: input " + to_string(x.shape()) + " (N,C) does not match d_in " +
                     format_number(config_.d_in));
  }
  const Tensor pre = matmul(x - b_dec, W_enc) + b_enc;  // [N, F]
  if (config_.top_k == 0) return relu(pre);
  Tensor mask;
  {
    NoGradGuard no_grad;
    mask = top_k_mask(pre, config_.top_k);
  }
  return relu(pre) * mask;
}

Tensor Sae::decode(const Tensor& features) const {
  return matmul(features, W_dec) + b_dec;
}

SaeOutput Sae::forward(const Tensor& x) const {
  SaeOutput out;
  out.features = encode(x);
  out.reconstruction = decode(out.features);
  const Tensor error = out.reconstruction - x;
  out.mse = mean(sum(error * error, {1}));
  out.l1 = mean(sum(out.features * row_norms(W_dec), {1}));
  out.loss = config_.top_k > 0 ? out.mse : out.mse + out.l1 * config_.l1_coefficient;
  return out;
}

Tensor Sae::reconstruct(const Tensor& x) const {
  const Shape shape = x.shape();
  const Tensor flat = reshape(x, {x.numel() / config_.d_in, config_.d_in}).to(W_dec.dtype());
  return reshape(decode(encode(flat)), shape).to(x.dtype());
}

void Sae::normalize_decoder() {
  NoGradGuard no_grad;
  W_dec.copy_from(W_dec / reshape(row_norms(W_dec), {config_.d_sae, 1}));
}

void Sae::remove_parallel_gradient() {
  const Tensor gradient = W_dec.grad();
  if (!gradient.defined()) return;
  NoGradGuard no_grad;
  const Tensor unit = W_dec / reshape(row_norms(W_dec), {config_.d_sae, 1});
  const Tensor along = sum(gradient * unit, {1}, true);  // [F, 1]
  W_dec.set_grad(gradient - along * unit);
}

uint64_t model_fingerprint(const nn::Module& model) {
  uint64_t hash = train::kFingerprintStart;
  for (const auto& [name, parameter] : model.named_parameters()) {
    hash = train::fingerprint(name.data(), name.size(), hash);
    const Shape& shape = parameter.shape();
    hash = train::fingerprint(shape.data(), shape.size() * sizeof(shape[0]), hash);
    const std::vector<double> values = parameter.to_vector();
    const std::vector<float> narrow(values.begin(), values.end());
    hash = train::fingerprint(narrow.data(), narrow.size() * sizeof(float), hash);
  }
  return hash;
}

}  // namespace gradlab::interp
