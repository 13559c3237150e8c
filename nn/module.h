// Module: the base of every layer. A module owns named parameters and named submodules,
// registered in its constructor; names compose with dots in registration order
// ("blocks.0.attn.q_proj.weight"), the names checkpoints use.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.h"

namespace gradlab::nn {

using NamedTensor = std::pair<std::string, Tensor>;

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Every parameter of this module and its submodules, depth-first in registration order.
  std::vector<NamedTensor> named_parameters() const;
  std::vector<Tensor> parameters() const;
  int64_t num_parameters() const;
  // The parameter with this dotted name; throws ConfigError naming it if there is none.
  Tensor parameter(const std::string& name) const;
  // This module ("") and every submodule with its dotted path ("blocks.0.attn"), depth-first in
  // registration order: the paths hook points are named by (nn/hooks.h).
  std::vector<std::pair<std::string, const Module*>> named_modules() const;

  void zero_grad();
  // Training mode (dropout active) for this module and every submodule.
  void train(bool training = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // Converts every parameter to dtype in place (float64 for gradient checks, float32 back).
  void to(DType dtype);

 protected:
  // Registers value as a parameter (marking it as requiring grad) and returns it.
  Tensor register_parameter(const std::string& name, Tensor value);
  // Registers module as the child `name` and returns it; a null module (a part the configuration
  // leaves out, such as the LayerNorms of norm "none") is returned unregistered.
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    if (module) children_.emplace_back(name, module);
    return module;
  }

 private:
  void collect(const std::string& prefix, std::vector<NamedTensor>& out) const;

  std::vector<NamedTensor> parameters_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

// Evaluation mode for a scope (a decode, an export), and training mode after it: the mode
// gradlab's loops keep a model in between such uses.
class EvalScope {
 public:
  explicit EvalScope(Module& module) : module_(module) { module_.eval(); }
  ~EvalScope() { module_.train(); }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  Module& module_;
};

}  // namespace gradlab::nn
