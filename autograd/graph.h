// Recording ops into the autograd graph, and grad mode.
//
// An op computes its output, then calls record<"name">() with its inputs and a backward closure.
// The closure must capture by value only what backward needs, and never the output tensor itself
// (that would make a cycle); capture `out.detach()` when backward needs the output's values. The
// name registers the op (op_registry.h), so that a test can require a gradient check of it.
#pragma once

#include <initializer_list>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autograd/op_registry.h"
#include "autograd/tensor.h"

namespace gradlab {

// True unless a NoGradGuard is alive on this thread.
bool grad_enabled();

// RAII: while alive, ops record nothing and allocate no graph.
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Gradients of leaves (parameters) collected by backward() passes apart from the leaves' own
// grad(): see LeafGradientScope.
class LeafGradients {
 public:
  // The gradient collected for leaf (undefined when none reached it). It may share storage with
  // other gradients of the pass: clone it before writing to it.
  Tensor of(const Tensor& leaf) const;
  // The same, moved out: afterwards this object holds no gradient for leaf. Threads may take the
  // gradients of different leaves at once.
  Tensor take(const Tensor& leaf);

 private:
  friend class Tensor;
  std::unordered_map<const detail::Node*, Tensor> grads_;
};

// While alive, backward() on the calling thread adds the gradients of leaves to `into` instead of
// to the leaves' grad(), and touches no leaf at all: several threads can then backpropagate
// graphs over the same parameters at once, each into its own LeafGradients (a batch's shares
// trained on threads, train/trainer.h). The values are those backward() would have added, summed
// in the same order. Scopes nest: the innermost collects.
class LeafGradientScope {
 public:
  explicit LeafGradientScope(LeafGradients& into);
  ~LeafGradientScope();
  LeafGradientScope(const LeafGradientScope&) = delete;
  LeafGradientScope& operator=(const LeafGradientScope&) = delete;

 private:
  LeafGradients* enclosing_;
};

namespace detail {
void attach(const Tensor& out, const char* op, std::span<const Tensor> inputs, BackwardFn backward);

// record<Name> without the registration: for the gradient checker's own tests, whose
// deliberately wrong ops no check may cover. Ops use record<Name>.
template <class F>
Tensor record(const char* op, Tensor out, std::span<const Tensor> inputs, F&& backward) {
  bool needed = false;
  for (const Tensor& input : inputs) needed = needed || (input.defined() && input.requires_grad());
  if (needed && grad_enabled()) {
    attach(out, op, inputs, BackwardFn(std::forward<F>(backward)));
  }
  return out;
}
}  // namespace detail

// Attaches `backward` to `out`, as op Name, if grad mode is on and any input requires grad. The
// closure is only turned into a std::function when it is needed, and a braced list of inputs is
// never copied into a vector, so no-grad evaluation allocates nothing.
template <OpName Name, class F>
Tensor record(Tensor out, const std::vector<Tensor>& inputs, F&& backward) {
  static_cast<void>(detail::OpRegistration<Name>::registered);
  return detail::record(Name.chars, std::move(out), inputs, std::forward<F>(backward));
}

template <OpName Name, class F>
Tensor record(Tensor out, std::initializer_list<Tensor> inputs, F&& backward) {
  static_cast<void>(detail::OpRegistration<Name>::registered);
  return detail::record(Name.chars, std::move(out),
                        std::span<const Tensor>(inputs.begin(), inputs.size()),
                        std::forward<F>(backward));
}

}  // namespace gradlab
