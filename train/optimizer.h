// Optimizers (SGD with momentum and Nesterov, Adam, AdamW) and global-norm gradient clipping;
// the learning-rate schedules are in schedule.h. Update rules follow PyTorch's torch.optim exactly,
// so their first steps can be checked against PyTorch's numbers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "nn/module.h"
#include "train/schedule.h"

namespace gradlab::train {

enum class OptimizerKind { Sgd, Adam, AdamW };

struct OptimizerRow {
  OptimizerKind id;
  const char* name;  // the --optimizer value
};
// The table of optimizers, the one place that knows their names.
const std::vector<OptimizerRow>& optimizer_kinds();
// The optimizer of an --optimizer value; throws ConfigError "optimizer: unknown optimizer 'x'
// (expected sgd, adam or adamw)".
OptimizerKind optimizer_named(const std::string& name);
const char* optimizer_name(OptimizerKind kind);

struct OptimizerConfig {
  std::string name = optimizer_name(OptimizerKind::AdamW);  // a row of optimizer_kinds()
  double beta1 = 0.9;                                       // Adam/AdamW
  double beta2 = 0.98;
  double eps = 1e-8;
  double weight_decay = 0.01;  // AdamW: decoupled; Adam and SGD: L2 added to the gradient.
                               // Only parameters for which decays() is true are decayed,
  bool decay_all = false;      // or every parameter (biases and norms too), as torch's one group.
  double momentum = 0.0;       // SGD
  bool nesterov = false;       // SGD
};

// True for parameters that get weight decay: weight matrices (rank >= 2), not biases or
// LayerNorm gains.
bool decays(const Tensor& parameter);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every parameter that has a gradient, with learning rate lr (>= 0); a
  // parameter without a gradient is left alone, state included. steps() counts step() calls,
  // and Adam's bias correction uses that global count (torch counts per parameter: the two
  // differ only for a parameter that missed steps).
  virtual void step(double lr) = 0;
  // Drops every parameter's gradient.
  void zero_grad();
  int64_t steps() const { return steps_; }
  void set_steps(int64_t steps) { steps_ = steps; }

  // The live state tensors, named "<parameter name>/<slot>" (e.g. "blocks.0.ln1.weight/exp_avg");
  // a checkpoint saves them and restores them with copy_from. Slots are created at
  // construction (zeros), so a fresh optimizer lists the same names as a used one.
  virtual std::vector<nn::NamedTensor> state() const = 0;
  const std::vector<nn::NamedTensor>& parameters() const { return params_; }

 protected:
  explicit Optimizer(std::vector<nn::NamedTensor> params) : params_(std::move(params)) {}
  std::vector<nn::NamedTensor> params_;
  int64_t steps_ = 0;
};

// Throws ConfigError naming the field for an unknown name or a bad hyperparameter (checks the
// fields the named optimizer uses: betas in [0, 1) and eps > 0 for Adam/AdamW; momentum >= 0
// and nesterov only with momentum > 0 for SGD; weight_decay >= 0 for all). State slots:
// SGD "momentum_buffer" (only with momentum > 0), Adam/AdamW "exp_avg" and "exp_avg_sq".
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          std::vector<nn::NamedTensor> params);

// The 2-norm of all the elements of tensors together (undefined ones skipped), summed in double
// part by part (train/share_threads.h), in the same order on any number of threads; NaN or
// infinite if any element is.
double global_norm(const std::vector<Tensor>& tensors);

// Scales all gradients so that their global L2 norm is at most max_norm (as
// torch.nn.utils.clip_grad_norm_: in place, by max_norm / (norm + 1e-6) whenever that is below
// 1); returns the norm before clipping. Parameters without a gradient are skipped. A non-finite
// norm is returned with the gradients left alone. Throws ConfigError unless max_norm > 0.
double clip_grad_norm(const std::vector<Tensor>& parameters, double max_norm);

}  // namespace gradlab::train
