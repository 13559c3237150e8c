// Every registered op passes its float64 gradient check (the same table as `gradlab gradcheck`),
// and the checker itself catches a wrong gradient.
#include <gtest/gtest.h>

#include "autograd/graph.h"
#include "autograd/op_checks.h"
#include "autograd/ops.h"

namespace gradlab {
void PrintTo(const OpCheck& check, std::ostream* out) {
  *out << check.name;
}

namespace test_op_gradients {

class OpGradient : public ::testing::TestWithParam<OpCheck> {};

TEST_P(OpGradient, MatchesCentralDifferences) {
  const OpCheck& check = GetParam();
  for (uint64_t seed : {0, 1}) {
    Generator gen(seed);
    const std::vector<Tensor> inputs = check.make_inputs(gen);
    for (const Tensor& t : inputs) {
      // All axis sizes differ, so a swapped axis would change the shape.
      for (size_t i = 0; i < t.shape().size(); ++i)
        for (size_t j = i + 1; j < t.shape().size(); ++j) EXPECT_NE(t.shape()[i], t.shape()[j]);
    }
    const GradcheckReport report = gradcheck(check.fn, inputs, check.options);
    EXPECT_TRUE(report.passed()) << check.name << ": " << describe(report);
    EXPECT_EQ(report.inputs.size(), inputs.size());
  }
}

INSTANTIATE_TEST_SUITE_P(AllOps, OpGradient, ::testing::ValuesIn(op_checks()),
                         [](const ::testing::TestParamInfo<OpCheck>& info) {
                           return info.param.name;
                         });

// An op whose backward is deliberately off by a factor of two. Recorded without registering
// (detail::record): no gradient check may cover it.
Tensor wrong_square(const Tensor& x) {
  Tensor out = x.detach() * x.detach();
  const Tensor inputs[] = {x};
  return detail::record("wrong_square", out, inputs, [x](const Tensor& g) {
    return std::vector<Tensor>{g * x};  // the true gradient is 2 * g * x
  });
}

TEST(Gradcheck, DetectsAWrongBackward) {
  Generator gen(0);
  const Tensor x = Tensor::randn({3, 5}, gen, DType::Float64);
  const GradcheckReport report =
      gradcheck([](const std::vector<Tensor>& in) { return wrong_square(in[0]); }, {x});
  EXPECT_FALSE(report.passed());
  EXPECT_GT(report.max_abs_error(), 1e-3);
  EXPECT_GE(report.inputs[0].worst_index, 0);
  EXPECT_NE(describe(report).find("fails"), std::string::npos);
}

TEST(Gradcheck, DetectsASwappedAxisInABackward) {
  // The gradient of x @ w with respect to x computed with the transposed layout: only
  // unequal sizes expose it, and then as a shape error.
  Generator gen(1);
  const Tensor x = Tensor::randn({3, 5}, gen, DType::Float64);
  const Tensor w = Tensor::randn({5, 7}, gen, DType::Float64);
  auto bad = [](const std::vector<Tensor>& in) {
    Tensor out = matmul(in[0].detach(), in[1].detach());
    const Tensor inputs[] = {in[0]};
    return detail::record("bad_matmul", out, inputs, [w = in[1]](const Tensor& g) {
      return std::vector<Tensor>{matmul(transpose(w, 0, 1), transpose(g, 0, 1))};
    });
  };
  EXPECT_THROW(gradcheck(bad, {x, w}), ShapeError);
}

TEST(Gradcheck, ASampleOfElementsPerturbsOnlyThemAndStillFindsAWrongBackward) {
  Generator gen(2);
  const Tensor x = Tensor::randn({37, 53}, gen, DType::Float64).set_requires_grad();
  int64_t calls = 0;
  const GradcheckOptions sampled{.seed = 3, .elements_per_tensor = 24};
  const GradcheckReport wrong = gradcheck_tensors(
      [&] {
        ++calls;
        return wrong_square(x);
      },
      {x}, sampled);
  EXPECT_EQ(calls, 1 + 2 * 24);  // one forward for the analytic gradient, two per element
  EXPECT_FALSE(wrong.passed());
  const GradcheckReport right = gradcheck_tensors([&] { return x * x; }, {x}, sampled);
  EXPECT_TRUE(right.passed()) << describe(right);
  // A tensor no larger than the sample is checked whole.
  const Tensor small = Tensor::randn({4, 6}, gen, DType::Float64).set_requires_grad();
  calls = 0;
  gradcheck_tensors(
      [&] {
        ++calls;
        return small * small;
      },
      {small}, sampled);
  EXPECT_EQ(calls, 1 + 2 * 24);
}

}  // namespace test_op_gradients
}  // namespace gradlab
