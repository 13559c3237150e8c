// The rows of the initialisation table: the constructors' default, GPT-2's and TransformerLens's.
#include "nn/initialisation.h"

#include <cmath>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/kinds.h"
#include "nn/sequence_model.h"

namespace gradlab::nn {
namespace {

// Xavier-uniform projections, normal(0, 0.02) embeddings, zero biases: what the layers'
// constructors already drew.
void keep_default(Module&, const ModelConfig&, Generator&) {}

// Every weight matrix normal(0, 0.02), the residual output projections (attention W_O and the
// second feed-forward Linear) normal(0, 0.02 / sqrt(2 layers)), zero biases; LayerNorms kept.
void gpt2(Module& model, const ModelConfig& config, Generator& gen) {
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.num_layers));
  for (const auto& [name, parameter] : model.named_parameters()) {
    if (name.find("ln") != std::string::npos && parameter.rank() == 1) continue;  // LayerNorms
    Tensor value;
    if (parameter.rank() == 1) {
      value = Tensor::zeros(parameter.shape(), parameter.dtype());  // biases
    } else {
      // The projections that end in a residual addition: each adds to the same stream.
      const bool residual =
          name.ends_with("attn.out_proj.weight") || name.ends_with("ffn.fc2.weight");
      value = Tensor::randn(parameter.shape(), gen, parameter.dtype(), 0.0,
                            residual ? residual_std : 0.02);
    }
    Tensor(parameter).copy_from(value);
  }
}

// TransformerLens's default ("gpt2" init_mode of HookedTransformer, initializer_range unset):
// every weight matrix, embeddings and unembedding included, normal(0, 0.8 / sqrt(d_model)); zero
// biases; norms kept. What its grokking models are trained from.
void transformer_lens(Module& model, const ModelConfig& config, Generator& gen) {
  const double std = 0.8 / std::sqrt(static_cast<double>(config.d_model));
  for (const auto& [name, parameter] : model.named_parameters()) {
    if (name.find("ln") != std::string::npos && parameter.rank() == 1) continue;  // norms
    const Tensor value = parameter.rank() == 1
                             ? Tensor::zeros(parameter.shape(), parameter.dtype())
                             : Tensor::randn(parameter.shape(), gen, parameter.dtype(), 0.0, std);
    Tensor(parameter).copy_from(value);
  }
}

}  // namespace

const std::vector<InitKind>& init_kinds() {
  static const std::vector<InitKind> kinds{
      {kDefaultInit, "Xavier-uniform projections, normal(0, 0.02) embeddings, zero biases",
       keep_default},
      {kGpt2Init, "normal(0, 0.02), scaled residual projections", gpt2},
      {"transformerlens", "TransformerLens's: every weight matrix normal(0, 0.8/sqrt(d-model))",
       transformer_lens},
  };
  return kinds;
}

std::string init_names() {
  return names_of(init_kinds());
}

const InitKind& init_kind(const std::string& name) {
  return row_named(init_kinds(), name, "init");
}

}  // namespace gradlab::nn
