// The reverse-mode engine: grad mode, recording, and backward() by an iterative topological
// sort, so graph depth is limited by memory, never by the call stack.
#include <string>
#include <unordered_set>

#include "autograd/elementwise.h"
#include "autograd/graph.h"
#include "autograd/reduce.h"

namespace gradlab {
namespace {

thread_local bool grad_mode = true;
thread_local LeafGradients* leaf_gradients = nullptr;  // the innermost LeafGradientScope's

using NodePtr = std::shared_ptr<detail::Node>;

// Nodes reachable from root through tensors that require grad, each after all of its inputs.
// Owning pointers: freeing the graph during the pass must not destroy nodes still to be visited.
std::vector<NodePtr> topological_order(const NodePtr& root) {
  std::vector<NodePtr> order;
  std::unordered_set<detail::Node*> visited{root.get()};
  std::vector<std::pair<NodePtr, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    const NodePtr node = stack.back().first;
    const size_t next = stack.back().second++;
    if (next < node->inputs.size()) {
      const NodePtr& input = node->inputs[next];
      if (input && input->requires_grad && visited.insert(input.get()).second) {
        stack.emplace_back(input, 0);
      }
    } else {
      order.push_back(node);
      stack.pop_back();
    }
  }
  return order;
}

// The error for a backward that reaches a node of op `op` whose graph an earlier one freed.
GraphError freed_graph_error(const char* op) {
  return GraphError(std::string("backward: the graph through '") + op +
                    "' was freed by an earlier backward(); pass retain_graph = true to the "
                    "first call to backpropagate twice");
}

void accumulate(Tensor& slot, const Tensor& grad) {
  slot = slot.defined() ? slot + grad : grad;
}

}  // namespace

bool grad_enabled() {
  return grad_mode;
}

NoGradGuard::NoGradGuard() : previous_(grad_mode) {
  grad_mode = false;
}
NoGradGuard::~NoGradGuard() {
  grad_mode = previous_;
}

LeafGradientScope::LeafGradientScope(LeafGradients& into) : enclosing_(leaf_gradients) {
  leaf_gradients = &into;
}
LeafGradientScope::~LeafGradientScope() {
  leaf_gradients = enclosing_;
}

Tensor LeafGradients::of(const Tensor& leaf) const {
  const auto it = grads_.find(leaf.node().get());
  return it == grads_.end() ? Tensor() : it->second;
}

Tensor LeafGradients::take(const Tensor& leaf) {
  const auto it = grads_.find(leaf.node().get());
  if (it == grads_.end()) return Tensor();
  return std::move(it->second);  // the entry stays: threads may take others' at the same time
}

namespace detail {

void attach(const Tensor& out, const char* op, std::span<const Tensor> inputs,
            BackwardFn backward) {
  Node& node = *out.node();
  node.requires_grad = true;
  node.op = op;
  node.inputs.clear();
  node.inputs.reserve(inputs.size());
  for (const Tensor& input : inputs)
    node.inputs.push_back(input.defined() ? input.node() : nullptr);
  node.backward = std::move(backward);
}

Node::~Node() {
  std::vector<NodePtr> stack = std::move(inputs);
  backward = nullptr;
  while (!stack.empty()) {
    NodePtr node = std::move(stack.back());
    stack.pop_back();
    if (node && node.use_count() == 1) {
      for (NodePtr& input : node->inputs) stack.push_back(std::move(input));
      node->inputs.clear();
      node->backward = nullptr;
    }
  }
}

}  // namespace detail

void Tensor::backward(bool retain_graph) const {
  if (numel() != 1) {
    throw ShapeError("backward: output of shape " + to_string(shape()) +
                     " is not a scalar; pass an explicit gradient of that shape");
  }
  backward(Tensor::ones(shape(), dtype()), retain_graph);
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph) const {
  if (!requires_grad()) {
    throw GraphError(
        "backward: tensor does not require grad (no input of the graph was marked "
        "with set_requires_grad, or it was computed under NoGradGuard)");
  }
  if (node_->graph_freed) throw freed_graph_error(op_name());
  if (grad_output.shape() != shape()) {
    throw ShapeError("backward: gradient shape " + to_string(grad_output.shape()) +
                     " differs from output shape " + to_string(shape()));
  }
  check_same_dtype("backward", dtype(), grad_output.dtype());

  NoGradGuard no_grad;  // gradients are values, not graphs
  LeafGradients* const collector = leaf_gradients;
  // A collector's leaves gather this pass's gradients here first, as a leaf's pending_grad
  // would, and get them added at its end, as a leaf's grad would: the same sums in the same order.
  std::unordered_map<const detail::Node*, Tensor> pass_grads;
  const auto collect = [&] {
    for (auto& [leaf, grad] : pass_grads) {
      Tensor& sum = collector->grads_[leaf];
      sum = sum.defined() ? sum + grad : grad;
    }
  };
  if (collector && node_->op == nullptr) {
    pass_grads[node_.get()] = grad_output;
    collect();
    return;
  }
  const std::vector<NodePtr> order = topological_order(node_);
  // A backward closure that throws (a backward hook's) must leave no gradient pending on a node,
  // a parameter's above all, for the next pass to add.
  // (A collector's pass leaves the leaves be, as below.)
  struct ClearPendingUnlessDone {
    const std::vector<NodePtr>& order;
    bool leaves;
    bool done = false;
    ~ClearPendingUnlessDone() {
      if (done) return;
      for (const NodePtr& node : order) {
        if (leaves || node->op != nullptr) node->pending_grad = Tensor();
      }
    }
  } clear_pending{order, collector == nullptr};
  node_->pending_grad = grad_output;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    detail::Node& node = **it;
    // Another thread's pass may be reading or writing this leaf: a collector's pass leaves it be.
    if (collector && node.op == nullptr) continue;
    Tensor grad = std::move(node.pending_grad);
    node.pending_grad = Tensor();
    if (!grad.defined()) continue;
    if (node.op == nullptr) {
      // The first gradient is copied: the engine's gradients may share storage with others.
      node.grad = node.grad.defined() ? node.grad + grad : grad.clone();
      continue;
    }
    if (node.graph_freed) throw freed_graph_error(node.op);
    std::vector<Tensor> input_grads = node.backward(grad);
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      detail::Node* input = node.inputs[i].get();
      if (!input || !input->requires_grad || i >= input_grads.size()) continue;
      if (!input_grads[i].defined()) continue;
      Tensor& slot = collector && input->op == nullptr ? pass_grads[input] : input->pending_grad;
      accumulate(slot, sum_to(input_grads[i], input->shape));
    }
    if (!retain_graph) {
      node.backward = nullptr;
      node.inputs.clear();
      node.graph_freed = true;
    }
  }
  clear_pending.done = true;
  if (collector) collect();
}

}  // namespace gradlab
