// Optimizers and gradient clipping (see optimizer.h).
//
// The update rules follow torch.optim's single-tensor (foreach=False) code of PyTorch 1.13
// operation by operation, so float64 results agree with PyTorch to rounding. Two deliberate
// differences, both invisible when every parameter gets a gradient at every step and the
// PyTorch parameter groups give non-decaying parameters weight_decay 0:
//  - Weight decay (L2 for SGD and Adam, decoupled for AdamW) applies only to parameters for
//    which decays() is true (every parameter with decay_all); torch applies a group's
//    weight_decay to all of its parameters.
//  - Adam's bias correction uses the optimizer's global step count (steps_, incremented once
//    per step() call); torch counts steps per parameter, so the two differ for a parameter that
//    missed a step for lack of a gradient.
// The hot loops run over the contiguous data in the parameters' own dtype (float32 or float64)
// and allocate nothing; one parallel region updates every parameter, the threads sharing each
// one's elements as the step's other loops over them do (train/share_threads.h).
#include "train/optimizer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/optimizer.h"
#include "autograd/kinds.h"
#include "train/share_threads.h"

namespace gradlab::train {
namespace {

// One parameter and its state slots (undefined when the optimizer keeps none).
struct Slot {
  std::string name;
  Tensor param;
  Tensor first;   // SGD: momentum_buffer; Adam: exp_avg
  Tensor second;  // Adam: exp_avg_sq
  bool decay = false;
};

// Checks, once per step and parameter, that the state still matches the parameter (a module
// moved to another dtype after the optimizer was built would not).
void check_state(const Slot& slot, const Tensor& state) {
  if (state.dtype() != slot.param.dtype() || state.numel() != slot.param.numel()) {
    throw DTypeError("optimizer: state of parameter '" + slot.name + "' is " +
                     dtype_name(state.dtype()) + " with " + std::to_string(state.numel()) +
                     " elements but the parameter is " + dtype_name(slot.param.dtype()) + " with " +
                     std::to_string(slot.param.numel()) +
                     " (build the optimizer after converting the model)");
  }
}

// One parameter's element loop: a kernel call over [0, n) that can also run over any part of
// it. Gathered, with every check, on the calling thread before the shared region.
template <class T, class Step>
struct Update {
  T* p;
  const T* g;
  T* first;  // state slots, null when the optimizer keeps none
  T* second;
  int64_t n;
  Step step;
};

// The updates of one step, in both element types; the vectors keep their capacity.
template <template <class> class Step>
struct Updates {
  std::vector<Update<float, Step<float>>> f32;
  std::vector<Update<double, Step<double>>> f64;

  template <class T>
  std::vector<Update<T, Step<T>>>& of() {
    if constexpr (std::is_same_v<T, float>) {
      return f32;
    } else {
      return f64;
    }
  }

  // run_part(update, begin, end) over every update's elements, part by part of each parameter
  // (for_parameter_parts): one parallel region for all parameters, most of which are below the
  // size at which a parallel loop each would pay. Every element is updated by one thread alone,
  // so the results do not depend on the thread count.
  template <class F>
  void run(F run_part) {
    int64_t total = 0;
    for (const auto& u : f32) total += u.n;
    for (const auto& u : f64) total += u.n;
    for_parameter_parts(total, [&](int64_t part) {
      auto of = [&](const auto& updates) {
        for (const auto& u : updates) {
          const auto [begin, end] = parameter_part(u.n, part);
          if (begin < end) run_part(u, begin, end);
        }
      };
      of(f32);
      of(f64);
    });
  }

  // Before gathering a step's updates (a check that threw may have left some of the last's).
  void clear() {
    f32.clear();
    f64.clear();
  }
};

// A pointer moved to element `begin`, or null.
template <class T>
T* at(T* p, int64_t begin) {
  return p ? p + begin : nullptr;
}

void check_lr(double lr) {
  if (!(lr >= 0.0) || !std::isfinite(lr)) {
    throw ConfigError("optimizer: lr must be finite and >= 0, got " + format_number(lr));
  }
}

class StatefulOptimizer : public Optimizer {
 public:
  StatefulOptimizer(std::vector<nn::NamedTensor> params, bool decay_all, bool first_slot,
                    bool second_slot)
      : Optimizer(std::move(params)) {
    slots_.reserve(params_.size());
    for (const auto& [name, p] : params_) {
      if (!p.defined()) throw ConfigError("optimizer: parameter '" + name + "' is undefined");
      Slot slot{name, p, Tensor(), Tensor(), decay_all || decays(p)};
      if (first_slot) slot.first = Tensor::zeros(p.shape(), p.dtype());
      if (second_slot) slot.second = Tensor::zeros(p.shape(), p.dtype());
      slots_.push_back(std::move(slot));
    }
  }

  std::vector<nn::NamedTensor> state() const override {
    std::vector<nn::NamedTensor> out;
    for (const Slot& slot : slots_) {
      if (slot.first.defined()) out.emplace_back(slot.name + "/" + first_name(), slot.first);
      if (slot.second.defined()) out.emplace_back(slot.name + "/" + second_name(), slot.second);
    }
    return out;
  }

 protected:
  virtual const char* first_name() const = 0;
  virtual const char* second_name() const = 0;
  std::vector<Slot> slots_;
};

// torch.optim.SGD with dampening 0: d = g + wd p; b = momentum b + d (b = d on the first step,
// which equals the update of a zero buffer); d = d + momentum b (Nesterov) or d = b; p -= lr d.
class SGD final : public StatefulOptimizer {
 public:
  SGD(const OptimizerConfig& config, std::vector<nn::NamedTensor> params)
      : StatefulOptimizer(std::move(params), config.decay_all, config.momentum > 0.0, false),
        momentum_(config.momentum),
        weight_decay_(config.weight_decay),
        nesterov_(config.nesterov) {}

  void step(double lr) override {
    check_lr(lr);
    ++steps_;
    updates_.clear();
    for (Slot& slot : slots_) {
      Tensor grad = slot.param.grad();
      if (!grad.defined()) continue;
      if (slot.first.defined()) check_state(slot, slot.first);
      dispatch(slot.param.dtype(), [&]<class T>() {
        const kernels::SgdStep<T> step{static_cast<T>(-lr),
                                       static_cast<T>(slot.decay ? weight_decay_ : 0.0),
                                       static_cast<T>(momentum_), nesterov_};
        updates_.of<T>().push_back({slot.param.mutable_data<T>(), grad.data<T>(),
                                    slot.first.defined() ? slot.first.mutable_data<T>() : nullptr,
                                    nullptr, slot.param.numel(), step});
      });
    }
    updates_.run([](const auto& u, int64_t begin, int64_t end) {
      kernels::sgd_update(u.p + begin, u.g + begin, at(u.first, begin), end - begin, u.step);
    });
  }

 private:
  const char* first_name() const override { return "momentum_buffer"; }
  const char* second_name() const override { return ""; }

  double momentum_;
  double weight_decay_;
  bool nesterov_;
  Updates<kernels::SgdStep> updates_;
};

// torch.optim.Adam (decoupled = false: L2, g += wd p) and torch.optim.AdamW (decoupled = true:
// p *= 1 - lr wd first). With t = steps_: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).
class Adam final : public StatefulOptimizer {
 public:
  Adam(const OptimizerConfig& config, std::vector<nn::NamedTensor> params, bool decoupled)
      : StatefulOptimizer(std::move(params), config.decay_all, true, true),
        beta1_(config.beta1),
        beta2_(config.beta2),
        eps_(config.eps),
        weight_decay_(config.weight_decay),
        decoupled_(decoupled) {}

  void step(double lr) override {
    check_lr(lr);
    ++steps_;
    updates_.clear();
    const double t = static_cast<double>(steps_);
    const double bias_correction1 = 1.0 - std::pow(beta1_, t);
    const double bias_correction2 = 1.0 - std::pow(beta2_, t);
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    for (Slot& slot : slots_) {
      Tensor grad = slot.param.grad();
      if (!grad.defined()) continue;
      check_state(slot, slot.first);
      check_state(slot, slot.second);
      const double wd = slot.decay ? weight_decay_ : 0.0;
      dispatch(slot.param.dtype(), [&]<class T>() {
        const kernels::AdamStep<T> step{static_cast<T>(beta1_),
                                        static_cast<T>(beta2_),
                                        static_cast<T>(1.0 - beta1_),
                                        static_cast<T>(1.0 - beta2_),
                                        static_cast<T>(decoupled_ ? 0.0 : wd),
                                        static_cast<T>(decoupled_ ? 1.0 - lr * wd : 1.0),
                                        static_cast<T>(bias_correction2_sqrt),
                                        static_cast<T>(eps_),
                                        static_cast<T>(-step_size)};
        updates_.of<T>().push_back({slot.param.mutable_data<T>(), grad.data<T>(),
                                    slot.first.mutable_data<T>(), slot.second.mutable_data<T>(),
                                    slot.param.numel(), step});
      });
    }
    updates_.run([](const auto& u, int64_t begin, int64_t end) {
      kernels::adam_update(u.p + begin, u.g + begin, u.first + begin, u.second + begin, end - begin,
                           u.step);
    });
  }

 private:
  const char* first_name() const override { return "exp_avg"; }
  const char* second_name() const override { return "exp_avg_sq"; }

  double beta1_;
  double beta2_;
  double eps_;
  double weight_decay_;
  bool decoupled_;
  Updates<kernels::AdamStep> updates_;
};

void validate_optimizer(const OptimizerConfig& config) {
  const OptimizerKind kind = optimizer_named(config.name);
  if (!(config.weight_decay >= 0.0) || !std::isfinite(config.weight_decay)) {
    throw ConfigError("optimizer: weight_decay must be finite and >= 0, got " +
                      format_number(config.weight_decay));
  }
  if (kind == OptimizerKind::Sgd) {
    if (!(config.momentum >= 0.0) || !std::isfinite(config.momentum)) {
      throw ConfigError("optimizer: momentum must be finite and >= 0, got " +
                        format_number(config.momentum));
    }
    if (config.nesterov && config.momentum == 0.0) {
      throw ConfigError("optimizer: nesterov requires momentum > 0, got momentum " +
                        format_number(config.momentum));
    }
    return;
  }
  const std::pair<const char*, double> betas[] = {{"beta1", config.beta1}, {"beta2", config.beta2}};
  for (const auto& [field, beta] : betas) {
    if (!(beta >= 0.0 && beta < 1.0)) {
      throw ConfigError(std::string("optimizer: ") + field + " must be in [0, 1), got " +
                        format_number(beta));
    }
  }
  if (!(config.eps > 0.0) || !std::isfinite(config.eps)) {
    throw ConfigError("optimizer: eps must be finite and > 0, got " + format_number(config.eps));
  }
}

}  // namespace

const std::vector<OptimizerRow>& optimizer_kinds() {
  static const std::vector<OptimizerRow> kinds{
      {OptimizerKind::Sgd, "sgd"},
      {OptimizerKind::Adam, "adam"},
      {OptimizerKind::AdamW, "adamw"},
  };
  return kinds;
}

OptimizerKind optimizer_named(const std::string& name) {
  return row_named(optimizer_kinds(), name, "optimizer", "optimizer: ").id;
}

const char* optimizer_name(OptimizerKind kind) {
  return row_of(optimizer_kinds(), kind).name;
}

bool decays(const Tensor& parameter) {
  return parameter.rank() >= 2;
}

void Optimizer::zero_grad() {
  for (auto& [name, p] : params_) p.zero_grad();
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config,
                                          std::vector<nn::NamedTensor> params) {
  validate_optimizer(config);
  switch (optimizer_named(config.name)) {
    case OptimizerKind::Sgd:
      return std::make_unique<SGD>(config, std::move(params));
    case OptimizerKind::Adam:
      return std::make_unique<Adam>(config, std::move(params), false);
    case OptimizerKind::AdamW:
      return std::make_unique<Adam>(config, std::move(params), true);
  }
  throw std::logic_error("make_optimizer: an optimizer without a row");
}

// --- Clipping -----------------------------------------------------------------------------

double global_norm(const std::vector<Tensor>& tensors) {
  // Each part's sums of squares apart, added in tensor and part order afterwards.
  std::array<std::vector<double>, kParameterParts> squares;
  int64_t elements = 0;
  for (const Tensor& t : tensors) elements += t.defined() ? t.numel() : 0;
  for_parameter_parts(elements, [&](int64_t part) {
    std::vector<double>& sums = squares[static_cast<size_t>(part)];
    sums.assign(tensors.size(), 0.0);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const Tensor& t = tensors[i];
      if (!t.defined()) continue;
      dispatch(t.dtype(), [&]<class T>() {
        const T* x = t.data<T>();
        const auto [begin, end] = parameter_part(t.numel(), part);
        double sum = 0.0;
#pragma omp simd reduction(+ : sum)
        for (int64_t j = begin; j < end; ++j) {
          const double v = static_cast<double>(x[j]);
          sum += v * v;
        }
        sums[i] = sum;
      });
    }
  });
  double sum_squares = 0.0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (const std::vector<double>& sums : squares) sum_squares += sums[i];
  }
  return std::sqrt(sum_squares);
}

double clip_grad_norm(const std::vector<Tensor>& parameters, double max_norm) {
  if (!(max_norm > 0.0)) {
    throw ConfigError("clip_grad_norm: max_norm must be > 0, got " + format_number(max_norm));
  }
  std::vector<Tensor> grads;
  grads.reserve(parameters.size());
  for (const Tensor& p : parameters) grads.push_back(p.grad());
  const double total = global_norm(grads);
  // torch: coefficient max_norm / (total + 1e-6), clamped to at most 1. A non-finite norm leaves
  // the gradients alone (torch would fill them with NaN); the caller sees it in the result.
  const double coef = max_norm / (total + 1e-6);
  if (!(coef < 1.0) || !std::isfinite(total)) return total;
  // The pointers are taken here, on this thread: mutable_data marks each gradient written once.
  std::vector<void*> values(grads.size(), nullptr);
  int64_t elements = 0;
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    dispatch(grads[i].dtype(), [&]<class T>() { values[i] = grads[i].mutable_data<T>(); });
    elements += grads[i].numel();
  }
  for_parameter_parts(elements, [&](int64_t part) {
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!values[i]) continue;
      dispatch(grads[i].dtype(), [&]<class T>() {
        T* g = static_cast<T*>(values[i]);
        const T c = static_cast<T>(coef);
        const auto [begin, end] = parameter_part(grads[i].numel(), part);
        for (int64_t j = begin; j < end; ++j) g[j] *= c;
      });
    }
  });
  return total;
}

}  // namespace gradlab::train
