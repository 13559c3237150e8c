// StackedLinear: the stacked copy of the layers' parameters, kept until one of them changes,
// and the graph node through which each layer gets its share of the stacked gradient.
//
// Why a kept copy and not parameters that are views into one buffer: tensors here own whole
// buffers (no offsets), and a module's parameters get replaced wholesale (Module::to,
// checkpoints), which would break such views. Tensor::version() tells when a parameter may have
// been written (by the optimizer, copy_from, set_data, any mutable_data<T>() pointer), so the
// copy is made again exactly then: once per optimizer step in training, never between steps
// (evaluation, generation, gradient accumulation).
#include "nn/stacked_linear.h"

#include "autograd/graph.h"
#include "autograd/ops.h"

namespace gradlab::nn {
namespace {

// `stacked` (parts concatenated along axis 0, made earlier) as a node of the graph over parts:
// nothing is copied forward, and backward gives each part its rows of the gradient, exactly as
// concat's backward does.
Tensor as_concat_of(const Tensor& stacked, const std::vector<Tensor>& parts) {
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (const Tensor& part : parts) {
    starts.push_back(start);
    start += part.size(0);
  }
  // A node of its own over the same storage: every forward pass records its own graph.
  return record<"stacked">(stacked.detach(), parts, [parts, starts](const Tensor& g) {
    std::vector<Tensor> grads;
    for (size_t i = 0; i < parts.size(); ++i) {
      grads.push_back(parts[i].requires_grad() ? narrow(g, 0, starts[i], parts[i].size(0))
                                               : Tensor());
    }
    return grads;
  });
}

}  // namespace

StackedLinear::StackedLinear(std::vector<std::shared_ptr<Linear>> layers)
    : layers_(std::move(layers)) {
  if (layers_.empty()) throw ConfigError("StackedLinear: no layers to stack");
  const Linear& first = *layers_.front();
  for (const auto& layer : layers_) {
    if (layer->weight.size(1) != first.weight.size(1) ||
        layer->bias.defined() != first.bias.defined()) {
      throw ConfigError("StackedLinear: layers of weights " + to_string(first.weight.shape()) +
                        " and " + to_string(layer->weight.shape()) + " (out,in), " +
                        (first.bias.defined() ? "with" : "without") + " and " +
                        (layer->bias.defined() ? "with" : "without") +
                        " bias, differ in their input or bias");
    }
  }
}

StackedLinear::Stacked StackedLinear::current() const {
  std::vector<uint64_t> versions;
  for (const auto& layer : layers_) {
    versions.push_back(layer->weight.version());
    if (layer->bias.defined()) versions.push_back(layer->bias.version());
  }
  std::lock_guard lock(mutex_);
  if (versions != stacked_.versions) {
    NoGradGuard no_grad;  // a plain value; forward() links it to the parameters
    std::vector<Tensor> weights, biases;
    for (const auto& layer : layers_) {
      weights.push_back(layer->weight);
      if (layer->bias.defined()) biases.push_back(layer->bias);
    }
    stacked_ = {concat(weights, 0), biases.empty() ? Tensor() : concat(biases, 0), versions};
  }
  return stacked_;
}

Tensor StackedLinear::forward(const Tensor& x) const {
  const Stacked stacked = current();
  std::vector<Tensor> weights, biases;
  for (const auto& layer : layers_) {
    weights.push_back(layer->weight);
    if (layer->bias.defined()) biases.push_back(layer->bias);
  }
  const Tensor bias = biases.empty() ? Tensor() : as_concat_of(stacked.bias, biases);
  return linear(x, as_concat_of(stacked.weight, weights), bias);
}

}  // namespace gradlab::nn
