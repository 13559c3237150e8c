// Every op that records a backward closure is reached by a gradient check: the op registry
// (autograd/op_registry.h) knows the ops from their record<Name> calls, each check's report names
// the ops of its graph, and an op registered but in no check's graph has no check. A new op
// fails here until autograd/op_checks.cpp (or nn/module_checks.cpp) has a row that reaches it.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "autograd/graph.h"
#include "autograd/op_checks.h"
#include "autograd/ops.h"
#include "nn/module_checks.h"

namespace gradlab::gradient_check_coverage {

// The ops in the graphs of every op check and every module check, at one seed. An op check's
// graph is built as gradcheck() builds it (float64 inputs that require grad), without the
// central differences: the tiled-attention row alone takes seconds of them. A module check
// offers only its whole run, whose report names the ops.
std::set<std::string> ops_reached_by_checks() {
  std::set<std::string> reached;
  for (const OpCheck& check : op_checks()) {
    Generator gen(0);
    std::vector<Tensor> inputs;
    for (const Tensor& t : check.make_inputs(gen)) {
      inputs.push_back(t.to(DType::Float64).set_requires_grad());
    }
    const std::vector<std::string> ops = ops_in_graph(check.fn(inputs));
    reached.insert(ops.begin(), ops.end());
  }
  for (const nn::ModuleCheck& check : nn::module_checks()) {
    const GradcheckReport report = check.run(0);
    reached.insert(report.ops.begin(), report.ops.end());
  }
  return reached;
}

TEST(GradientCheckCoverage, EveryOpThatRecordsABackwardHasACheck) {
  const std::vector<std::string> registered = registered_ops();
  const std::set<std::string> reached = ops_reached_by_checks();
  for (const std::string& op : registered) {
    EXPECT_TRUE(reached.contains(op))
        << "op '" << op << "' records a backward closure, but no row of op_checks() "
        << "(autograd/op_checks.cpp) or nn::module_checks() reaches it";
  }
  // The other way round: every op in a checked graph registered itself, so the registry misses
  // none of the ops the checks know.
  for (const std::string& op : reached) {
    EXPECT_TRUE(std::binary_search(registered.begin(), registered.end(), op))
        << "op '" << op << "' is in a checked graph but not in registered_ops()";
  }
}

TEST(GradientCheckCoverage, AnOpIsRegisteredBeforeItRuns) {
  // CTest runs this test in a process of its own, in which no op has run yet.
  const std::vector<std::string> registered = registered_ops();
  EXPECT_TRUE(std::binary_search(registered.begin(), registered.end(), "permute"));
  EXPECT_TRUE(std::binary_search(registered.begin(), registered.end(), "fused_attention"));
}

TEST(GradientCheckCoverage, AReportNamesTheOpsOfItsGraphOnly) {
  Generator gen(0);
  const Tensor x = Tensor::randn({3, 5}, gen, DType::Float64);
  const GradcheckReport report =
      gradcheck([](const std::vector<Tensor>& in) { return exp(in[0]) * 2.0; }, {x});
  // Not the checker's own sum(y * W).
  EXPECT_EQ(report.ops, (std::vector<std::string>{"exp", "mul_scalar"}));
}

}  // namespace gradlab::gradient_check_coverage
