// Recording ops into the autograd graph, and grad mode.
//
// An op computes its output, then calls record() with its inputs and a backward closure. The
// closure must capture by value only what backward needs, and never the output tensor itself
// (that would make a cycle); capture `out.detach()` when backward needs the output's values.
#pragma once

#include <initializer_list>
#include <utility>

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

namespace detail {
void attach(const Tensor& out, const char* op, const std::vector<Tensor>& inputs,
            BackwardFn backward);
}  // namespace detail

// Attaches `backward` to `out` if grad mode is on and any input requires grad. The closure is
// only turned into a std::function when it is needed, so no-grad evaluation allocates nothing.
template <class F>
Tensor record(const char* op, Tensor out, const std::vector<Tensor>& inputs, F&& backward) {
  bool needed = false;
  for (const Tensor& input : inputs) needed = needed || (input.defined() && input.requires_grad());
  if (needed && grad_enabled()) {
    detail::attach(out, op, inputs, detail::BackwardFn(std::forward<F>(backward)));
  }
  return out;
}

template <class F>
Tensor record(const char* op, Tensor out, std::initializer_list<Tensor> inputs, F&& backward) {
  bool needed = false;
  for (const Tensor& input : inputs) needed = needed || (input.defined() && input.requires_grad());
  if (!needed || !grad_enabled()) return out;
  return record(op, std::move(out), std::vector<Tensor>(inputs), std::forward<F>(backward));
}

}  // namespace gradlab
