// The basic layers: Linear, Embedding, LayerNorm, Dropout, positional encodings, FeedForward,
// and the tables of the normalisations and activations a ModelConfig names (`norm`,
// `activation`: the --norm and --activation flags).
//
// Initialisation (deterministic for a given Generator): Linear weights Xavier/Glorot uniform,
// U(-a, a) with a = sqrt(6 / (in + out)), biases zero; embeddings normal(0, 0.02); LayerNorm
// weight one, bias zero.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "autograd/indices.h"
#include "autograd/random.h"
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

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool with_bias = true);
  Tensor forward(const Tensor& x) const;  // over the last axis
  Tensor weight, bias;                    // bias undefined when built without one
  double eps;
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

// The fixed encoding of Vaswani et al.: PE[t, 2i] = sin(t / 10000^(2i/C)), PE[t, 2i+1] = cos(..).
class SinusoidalPositionalEncoding : public Module {
 public:
  SinusoidalPositionalEncoding(int64_t max_len, int64_t dim);
  // Positions [first, first + length): [T, C], no parameters.
  Tensor forward(int64_t length, DType dtype, int64_t first = 0) const;

 private:
  Tensor table_;  // [max_len, C], float64
};

// A learned position table, one row per position.
class LearnedPositionalEmbedding : public Module {
 public:
  LearnedPositionalEmbedding(int64_t max_len, int64_t dim, Generator& gen);
  Tensor forward(int64_t length, int64_t first = 0) const;  // positions [first, first + T): [T, C]
  Tensor weight;                                            // [max_len, C]
};

// The rows' names, for code that picks one: the defaults are ModelConfig's.
inline constexpr const char* kLayerNorm = "layer";
inline constexpr const char* kNoNorm = "none";
inline constexpr const char* kGelu = "gelu";
inline constexpr const char* kRelu = "relu";

// How a transformer normalises the residual stream before (pre-LN) or after (post-LN) each
// sublayer, and before the head.
struct NormKind {
  const char* name;
  const char* help;  // one line: what it does
  // A new normalisation over dim channels, or null for none: the residual stream is read (pre-LN)
  // or passed on (post-LN) as it is.
  std::shared_ptr<LayerNorm> (*make)(int64_t dim, bool bias);
};
const std::vector<NormKind>& norm_kinds();
// The row named name; throws ConfigError "unknown norm 'x' (expected layer or none)".
const NormKind& norm_kind(const std::string& name);

// The nonlinearity between the feed-forward sublayer's two Linears.
struct ActivationKind {
  const char* name;
  const char* help;  // one line: what it computes
  Tensor (*apply)(const Tensor& x);
};
const std::vector<ActivationKind>& activation_kinds();
// The row named name; throws ConfigError "unknown activation 'x' (expected gelu or relu)".
const ActivationKind& activation_kind(const std::string& name);

// Linear, activation (a row of activation_kinds()), Linear (with dropout after the second Linear
// when p > 0). Throws ConfigError for an unknown activation or a d_ff that is not positive.
class FeedForward : public Module {
 public:
  FeedForward(int64_t d_model, int64_t d_ff, Generator& gen, double dropout = 0.0,
              std::shared_ptr<Generator> dropout_gen = nullptr, bool bias = true,
              const std::string& activation = kGelu);
  Tensor forward(const Tensor& x) const;  // [B, T, C] -> [B, T, C]
  std::shared_ptr<Linear> fc1, fc2;
  std::shared_ptr<Dropout> drop;

 private:
  const ActivationKind* activation_;
};

}  // namespace gradlab::nn
