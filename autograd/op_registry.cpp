// The op registry (op_registry.h): names added at static initialisation, read by the gradient
// check coverage test, and the walk that lists the ops of a graph.
#include "autograd/op_registry.h"

#include <set>
#include <unordered_set>

namespace gradlab {
namespace {

// Built on first use: registrations run during static initialisation, in no set order.
std::set<std::string>& registry() {
  static std::set<std::string> names;
  return names;
}

}  // namespace

namespace detail {

bool register_op(const char* name) {
  registry().insert(name);
  return true;
}

}  // namespace detail

std::vector<std::string> registered_ops() {
  return {registry().begin(), registry().end()};
}

std::vector<std::string> ops_in_graph(const Tensor& root) {
  std::set<std::string> ops;
  if (!root.defined()) return {};
  std::unordered_set<const detail::Node*> visited{root.node().get()};
  std::vector<const detail::Node*> stack{root.node().get()};
  while (!stack.empty()) {
    const detail::Node* node = stack.back();
    stack.pop_back();
    if (node->op) ops.insert(node->op);
    for (const auto& input : node->inputs) {
      if (input && visited.insert(input.get()).second) stack.push_back(input.get());
    }
  }
  return {ops.begin(), ops.end()};
}

}  // namespace gradlab
