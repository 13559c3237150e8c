// The basic layers.
#include "nn/layers.h"

#include <cmath>

#include "autograd/kinds.h"
#include "autograd/ops.h"
#include "nn/hooks.h"

namespace gradlab::nn {
namespace {

thread_local Generator* dropout_stream = nullptr;  // the innermost DropoutStream's

void check_positive(const char* layer, const char* what, int64_t value) {
  if (value <= 0) {
    throw ConfigError(std::string(layer) + ": " + what + " must be positive, got " +
                      std::to_string(value));
  }
}

void check_length(const char* layer, int64_t length, int64_t first, int64_t max_len) {
  if (length < 0 || first < 0 || first + length > max_len) {
    throw ShapeError(std::string(layer) + ": positions " + std::to_string(first) + " to " +
                     std::to_string(first + length - 1) + " exceed the " + std::to_string(max_len) +
                     " positions it was built for");
  }
}

}  // namespace

Linear::Linear(int64_t in_features, int64_t out_features, Generator& gen, bool with_bias) {
  check_positive("Linear", "in_features", in_features);
  check_positive("Linear", "out_features", out_features);
  const double limit = std::sqrt(6.0 / static_cast<double>(in_features + out_features));
  weight = register_parameter("weight",
                              Tensor::uniform({out_features, in_features}, gen, -limit, limit));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({out_features}));
}

Tensor Linear::forward(const Tensor& x) const {
  return linear(x, weight, bias);
}

Embedding::Embedding(int64_t num_embeddings, int64_t dim, Generator& gen) {
  check_positive("Embedding", "num_embeddings", num_embeddings);
  check_positive("Embedding", "dim", dim);
  weight = register_parameter("weight",
                              Tensor::randn({num_embeddings, dim}, gen, DType::Float32, 0.0, 0.02));
}

Tensor Embedding::forward(const Indices& ids) const {
  return embedding(weight, ids);
}

Tensor Norm::forward(const Tensor& x) const {
  return hook_point(*this, "hook_normalized", normalize(x));
}

LayerNorm::LayerNorm(int64_t dim, double eps_, bool with_bias) : eps(eps_) {
  check_positive("LayerNorm", "dim", dim);
  weight = register_parameter("weight", Tensor::ones({dim}));
  if (with_bias) bias = register_parameter("bias", Tensor::zeros({dim}));
}

Tensor LayerNorm::normalize(const Tensor& x) const {
  return layer_norm(x, weight, bias, eps);
}

RMSNorm::RMSNorm(int64_t dim, double eps_) : eps(eps_) {
  check_positive("RMSNorm", "dim", dim);
  weight = register_parameter("weight", Tensor::ones({dim}));
}

Tensor RMSNorm::normalize(const Tensor& x) const {
  const Tensor mean_square = mean(x * x, {-1}, true);  // [..., 1]
  return x / sqrt(add(mean_square, eps)) * weight;
}

DropoutStream::DropoutStream(Generator& stream) : enclosing_(dropout_stream) {
  dropout_stream = &stream;
}
DropoutStream::~DropoutStream() {
  dropout_stream = enclosing_;
}

Dropout::Dropout(double p_, std::shared_ptr<Generator> gen) : p(p_), gen_(std::move(gen)) {
  if (!(p >= 0.0 && p < 1.0)) {
    throw ConfigError("Dropout: probability " + std::to_string(p) + " is outside [0, 1)");
  }
  if (p > 0.0 && !gen_) throw ConfigError("Dropout: p > 0 needs a generator");
}

Tensor Dropout::forward(const Tensor& x) const {
  if (p == 0.0 || !is_training()) return x;
  return dropout(x, p, true, dropout_stream ? *dropout_stream : *gen_);
}

SinusoidalPositionalEncoding::SinusoidalPositionalEncoding(int64_t max_len, int64_t dim)
    : table_(Tensor::empty({max_len, dim}, DType::Float64)) {
  check_positive("SinusoidalPositionalEncoding", "max_len", max_len);
  check_positive("SinusoidalPositionalEncoding", "dim", dim);
  double* p = table_.mutable_data<double>();
  for (int64_t t = 0; t < max_len; ++t) {
    for (int64_t i = 0; i < dim; ++i) {
      const double angle =
          static_cast<double>(t) / std::pow(10000.0, static_cast<double>(i - i % 2) / dim);
      p[t * dim + i] = i % 2 == 0 ? std::sin(angle) : std::cos(angle);
    }
  }
}

Tensor SinusoidalPositionalEncoding::forward(int64_t length, int64_t first, DType dtype) const {
  check_length("SinusoidalPositionalEncoding", length, first, table_.size(0));
  return narrow(table_, 0, first, length).to(dtype);
}

LearnedPositionalEmbedding::LearnedPositionalEmbedding(int64_t max_len, int64_t dim,
                                                       Generator& gen) {
  check_positive("LearnedPositionalEmbedding", "max_len", max_len);
  check_positive("LearnedPositionalEmbedding", "dim", dim);
  weight =
      register_parameter("weight", Tensor::randn({max_len, dim}, gen, DType::Float32, 0.0, 0.02));
}

Tensor LearnedPositionalEmbedding::forward(int64_t length, int64_t first, DType) const {
  check_length("LearnedPositionalEmbedding", length, first, weight.size(0));
  return narrow(weight, 0, first, length);
}

const std::vector<ActivationKind>& activation_kinds() {
  static const std::vector<ActivationKind> kinds{
      {kGelu, "GELU, x Phi(x) with the normal CDF (the exact form)", gelu},
      {kRelu, "ReLU, max(x, 0)", relu},
  };
  return kinds;
}

const ActivationKind& activation_kind(const std::string& name) {
  return row_named(activation_kinds(), name, "activation");
}

FeedForward::FeedForward(int64_t d_model, const FeedForwardOptions& options, Generator& gen,
                         bool bias)
    : activation_(&activation_kind(options.activation)) {
  fc1 = register_module("fc1", std::make_shared<Linear>(d_model, options.d_ff, gen, bias));
  fc2 = register_module("fc2", std::make_shared<Linear>(options.d_ff, d_model, gen, bias));
}

Tensor FeedForward::forward(const Tensor& x) const {
  const Tensor pre = hook_point(*this, "hook_pre", fc1->forward(x));            // [B, T, F]
  const Tensor post = hook_point(*this, "hook_post", activation_->apply(pre));  // [B, T, F]
  return fc2->forward(post);
}

}  // namespace gradlab::nn
