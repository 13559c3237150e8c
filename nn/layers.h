// The basic layers: Linear, Embedding, the norms (LayerNorm, RMSNorm), Dropout, the positional
// schemes (learned, sinusoidal), FeedForward, and the table of the activations a ModelConfig
// names (the --activation flag). The norms, positional schemes and feed-forwards a model builds
// by name are in nn/module_registry.h.
//
// Initialisation (deterministic for a given Generator): Linear weights Xavier/Glorot uniform,
// U(-a, a) with a = sqrt(6 / (in + out)), biases zero; embeddings normal(0, 0.02); norm weights
// one, biases zero.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/indices.h"
#include "autograd/random.h"
#include "nn/model_options.h"
#include "nn/module.h"

namespace gradlab::nn {

// y = x W^T + b, W [out, in] (PyTorch's layout).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, Generator& gen, bool bias = true);
  Tensor forward(const Tensor& x) const;  // [..., in] -> [..., out]
  Tensor weight, bias;                    // bias undefined without bias
};

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t dim, Generator& gen);
  Tensor forward(const Indices& ids) const;  // [...] -> [..., dim]
  Tensor weight;                             // [num_embeddings, dim]
};

// A module from the residual stream to the residual stream, [B, T, C] -> [B, T, C]: what a
// block's feed-forward sublayer is.
class Sublayer : public Module {
 public:
  virtual Tensor forward(const Tensor& x) const = 0;
};

// A normalisation of the residual stream over its last axis. Its result is the hook point
// hook_normalized, whatever the kind: a norm of one's own implements normalize() alone.
class Norm : public Module {
 public:
  Tensor forward(const Tensor& x) const;  // [..., C] -> [..., C]
  // The same without the hook point: for a block's per-head copies of the stream, which are not
  // the [B, T, C] hook_normalized.
  Tensor normalize_copies(const Tensor& x) const { return normalize(x); }

 protected:
  virtual Tensor normalize(const Tensor& x) const = 0;
};

// (x - mean) / sqrt(var + eps) * weight + bias (Ba et al. 2016).
class LayerNorm : public Norm {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool with_bias = true);
  Tensor weight, bias;  // bias undefined when built without one
  double eps;

 protected:
  Tensor normalize(const Tensor& x) const override;
};

// x / sqrt(mean(x^2) + eps) * weight (Zhang and Sennrich 2019): no centring, no bias.
class RMSNorm : public Norm {
 public:
  explicit RMSNorm(int64_t dim, double eps = 1e-5);
  Tensor weight;
  double eps;

 protected:
  Tensor normalize(const Tensor& x) const override;
};

// Inverted dropout drawing from a generator shared by the whole model, so one state (saved in
// checkpoints) describes every dropout mask of a run.
class Dropout : public Module {
 public:
  Dropout(double p, std::shared_ptr<Generator> gen);
  Tensor forward(const Tensor& x) const;
  double p;

 private:
  std::shared_ptr<Generator> gen_;
};

// While alive, every Dropout run on the calling thread draws its masks from `stream` instead of
// the generator it was built with: the shares of a batch trained at once on several threads
// (train/trainer.h) each draw from a stream of their own. Scopes nest: the innermost applies.
class DropoutStream {
 public:
  explicit DropoutStream(Generator& stream);
  ~DropoutStream();
  DropoutStream(const DropoutStream&) = delete;
  DropoutStream& operator=(const DropoutStream&) = delete;

 private:
  Generator* enclosing_;
};

// What a model adds to its token embeddings for their positions: a row of the registry's
// positional schemes (nn/module_registry.h). The model adds the scheme's [T, C] to every
// sequence's token embeddings [B, T, C]; the sum is what the first block reads, and the scheme's
// output is the hook point hook_position (hook_source_position for an encoder's source).
class PositionalScheme : public Module {
 public:
  // The vectors of positions [first, first + length): [T, C], in dtype (the token embeddings'),
  // or in the dtype of the scheme's own parameters, which is the same. Throws ShapeError for
  // positions past the ones the scheme was built for.
  virtual Tensor forward(int64_t length, int64_t first, DType dtype) const = 0;
};

// The fixed encoding of Vaswani et al.: PE[t, 2i] = sin(t / 10000^(2i/C)), PE[t, 2i+1] = cos(..).
// No parameters.
class SinusoidalPositionalEncoding : public PositionalScheme {
 public:
  SinusoidalPositionalEncoding(int64_t max_len, int64_t dim);
  Tensor forward(int64_t length, int64_t first, DType dtype) const override;  // [T, C]

 private:
  Tensor table_;  // [max_len, C], float64
};

// A learned position table, one row per position.
class LearnedPositionalEmbedding : public PositionalScheme {
 public:
  LearnedPositionalEmbedding(int64_t max_len, int64_t dim, Generator& gen);
  // Rows [first, first + T) of weight: [T, C] (the table's dtype, which is the model's).
  Tensor forward(int64_t length, int64_t first, DType dtype) const override;
  Tensor weight;  // [max_len, C]
};

// The nonlinearity between the feed-forward sublayer's two Linears.
struct ActivationKind {
  const char* name;
  const char* help;  // one line: what it computes
  Tensor (*apply)(const Tensor& x);
};
const std::vector<ActivationKind>& activation_kinds();
// The row named name; throws ConfigError "unknown activation 'x' (expected gelu or relu)".
const ActivationKind& activation_kind(const std::string& name);

// The built-in feed-forward ("mlp"): Linear C -> F, activation (options.activation), Linear
// F -> C. Throws ConfigError for an unknown activation or a d_ff that is not positive.
class FeedForward : public Sublayer {
 public:
  FeedForward(int64_t d_model, const FeedForwardOptions& options, Generator& gen, bool bias = true);
  Tensor forward(const Tensor& x) const override;  // [B, T, C] -> [B, T, C]
  std::shared_ptr<Linear> fc1, fc2;

 private:
  const ActivationKind* activation_;
};

}  // namespace gradlab::nn
