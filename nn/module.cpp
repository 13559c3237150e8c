// Parameter registration and the operations that walk the module tree.
#include "nn/module.h"

#include "autograd/error.h"

namespace gradlab::nn {

Tensor Module::register_parameter(const std::string& name, Tensor value) {
  for (const auto& [existing, _] : parameters_) {
    if (existing == name) throw ConfigError("register_parameter: '" + name + "' registered twice");
  }
  value.set_requires_grad(true);
  parameters_.emplace_back(name, value);
  return value;
}

void Module::collect(const std::string& prefix, std::vector<NamedTensor>& out) const {
  for (const auto& [name, tensor] : parameters_) out.emplace_back(prefix + name, tensor);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

std::vector<NamedTensor> Module::named_parameters() const {
  std::vector<NamedTensor> out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [_, tensor] : named_parameters()) out.push_back(tensor);
  return out;
}

int64_t Module::num_parameters() const {
  int64_t total = 0;
  for (const Tensor& p : parameters()) total += p.numel();
  return total;
}

Tensor Module::parameter(const std::string& name) const {
  for (auto& [n, tensor] : named_parameters()) {
    if (n == name) return tensor;
  }
  throw ConfigError("parameter: no parameter named '" + name + "'");
}

std::vector<std::pair<std::string, const Module*>> Module::named_modules() const {
  std::vector<std::pair<std::string, const Module*>> out{{"", this}};
  for (const auto& [name, child] : children_) {
    for (const auto& [path, module] : child->named_modules()) {
      out.emplace_back(path.empty() ? name : name + "." + path, module);
    }
  }
  return out;
}

void Module::zero_grad() {
  for (Tensor& p : parameters()) p.zero_grad();
}

void Module::train(bool training) {
  training_ = training;
  for (auto& [_, child] : children_) child->train(training);
}

void Module::to(DType dtype) {
  for (Tensor& p : parameters()) {
    if (p.dtype() != dtype) p.set_data(p.to(dtype));
  }
}

}  // namespace gradlab::nn
