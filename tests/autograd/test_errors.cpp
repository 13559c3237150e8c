// Every kind of bad input raises the documented exception type, and its message names the op
// and the offending values (shapes, dtypes, axes, ids), on a single line.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <source_location>
#include <string>
#include <string_view>
#include <typeinfo>
#include <utility>

#include "autograd/graph.h"
#include "autograd/ops.h"

namespace gradlab {
namespace test_errors {

// Runs fn and expects it to throw exactly E with a one-line message containing every part.
template <class E, class F>
void expect_throw_with(F&& fn, std::initializer_list<std::string_view> parts,
                       std::source_location where = std::source_location::current()) {
  const char* file = where.file_name();
  const int line = static_cast<int>(where.line());
  try {
    fn();
  } catch (const E& e) {
    const std::string message = e.what();
    if (typeid(e) != typeid(E)) {
      ADD_FAILURE_AT(file, line) << "threw a subclass " << typeid(e).name() << ": " << message;
    }
    for (std::string_view part : parts) {
      if (message.find(part) == std::string::npos) {
        ADD_FAILURE_AT(file, line) << "message \"" << message << "\" lacks \"" << part << "\"";
      }
    }
    if (message.find('\n') != std::string::npos) {
      ADD_FAILURE_AT(file, line) << "message spans several lines: " << message;
    }
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE_AT(file, line) << "threw " << typeid(e).name() << " instead of " << typeid(E).name()
                               << ": " << e.what();
    return;
  }
  ADD_FAILURE_AT(file, line) << "did not throw " << typeid(E).name();
}

template <class E, class F>
void expect_throw_with(F&& fn, std::string_view part,
                       std::source_location where = std::source_location::current()) {
  expect_throw_with<E>(std::forward<F>(fn), {part}, where);
}

// --- The helper itself --------------------------------------------------------------------------

TEST(ErrorHelper, FailsWhenItShould) {
  // A missing substring, a wrong type and no exception each produce exactly one failure.
  EXPECT_NONFATAL_FAILURE(expect_throw_with<ShapeError>([] { throw ShapeError("abc"); }, "xyz"),
                          "lacks \"xyz\"");
  EXPECT_NONFATAL_FAILURE(expect_throw_with<ShapeError>([] { throw AxisError("axis 3"); }, "axis"),
                          "instead of");
  EXPECT_NONFATAL_FAILURE(expect_throw_with<ShapeError>([] {}, "x"), "did not throw");
  EXPECT_NONFATAL_FAILURE(expect_throw_with<ShapeError>([] { throw ShapeError("a\nb"); }, "a"),
                          "several lines");
  expect_throw_with<ShapeError>([] { throw ShapeError("matmul: [2] @ [3]"); },
                                {"matmul", "[2] @ [3]"});
}

// --- Shapes ---------------------------------------------------------------------------------

TEST(Errors, MatmulInnerDimensionMismatch) {
  const Tensor a = Tensor::zeros({2, 3, 4}), b = Tensor::zeros({5, 6});
  expect_throw_with<ShapeError>([&] { matmul(a, b); }, {"matmul", "[2,3,4] @ [5,6]"});
  expect_throw_with<ShapeError>(
      [] {
        matmul(Tensor::zeros({2, 3}), Tensor::zeros({5, 7}));
      },
      {"matmul", "inner", "[2,3] @ [5,7]"});
  expect_throw_with<ShapeError>(
      [] {
        matmul(Tensor::zeros({2, 3, 5}), Tensor::zeros({2, 7, 3}));
      },
      {"matmul", "[2,3,5] @ [2,7,3]"});
}

TEST(Errors, MatmulNeedsRankTwo) {
  expect_throw_with<ShapeError>(
      [] {
        matmul(Tensor::zeros({3}), Tensor::zeros({3, 5}));
      },
      {"matmul", "rank", "[3] @ [3,5]"});
}

TEST(Errors, MatmulBatchAxesThatDoNotBroadcast) {
  expect_throw_with<ShapeError>(
      [] {
        matmul(Tensor::zeros({2, 3, 4}), Tensor::zeros({3, 4, 5}));
      },
      {"matmul", "[2]", "[3]"});
}

TEST(Errors, BroadcastFailureNamesOpAndShapes) {
  const Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({5});
  expect_throw_with<ShapeError>([&] { add(a, b); }, {"add", "broadcast", "[2,3]", "[5]"});
  expect_throw_with<ShapeError>([&] { sub(a, b); }, {"sub", "[2,3]", "[5]"});
  expect_throw_with<ShapeError>([&] { mul(b, a); }, {"mul", "[5]", "[2,3]"});
  expect_throw_with<ShapeError>([&] { div(a, b); }, {"div", "[2,3]", "[5]"});
  // Trailing axes must agree even when the ranks match: [2,3] vs [3,2].
  expect_throw_with<ShapeError>([&] { a + Tensor::zeros({3, 2}); }, {"add", "[2,3]", "[3,2]"});
  expect_throw_with<ShapeError>([&] { where(Mask({2}, {1, 0}), a, a); }, {"where", "[2]", "[2,3]"});
  expect_throw_with<ShapeError>(
      [&] {
        broadcast_to(a, {3, 3});
      },
      {"broadcast_to", "[2,3]", "[3,3]"});
}

TEST(Errors, ReshapeWithAWrongElementCount) {
  const Tensor x = Tensor::zeros({2, 3, 5});
  expect_throw_with<ShapeError>([&] { reshape(x, {4, 7}); }, {"reshape", "[2,3,5]", "30", "[4,7]"});
  // 30 is not a multiple of 4, so -1 cannot be inferred.
  expect_throw_with<ShapeError>([&] { reshape(x, {4, -1}); }, {"reshape", "[2,3,5]", "[4,-1]"});
  expect_throw_with<ShapeError>([&] { reshape(x, {-1, 5, -1}); }, {"reshape", "-1"});
}

TEST(Errors, ConcatShapeMismatch) {
  expect_throw_with<ShapeError>(
      [] {
        concat({Tensor::zeros({2, 3}), Tensor::zeros({5, 7})}, 0);
      },
      {"concat", "[2,3]", "[5,7]"});
  // Along axis 1 the row counts must agree.
  expect_throw_with<ShapeError>(
      [] {
        concat({Tensor::zeros({2, 3}), Tensor::zeros({5, 3})}, 1);
      },
      {"concat", "axis 1", "[2,3]", "[5,3]"});
  expect_throw_with<ShapeError>(
      [] {
        concat({Tensor::zeros({2, 3}), Tensor::zeros({3})}, 0);
      },
      {"concat", "[2,3]", "[3]"});
  expect_throw_with<ShapeError>([] { concat({}, 0); }, {"concat", "no tensors"});
}

TEST(Errors, NarrowOutOfRange) {
  const Tensor x = Tensor::zeros({2, 7});
  expect_throw_with<ShapeError>([&] { narrow(x, 1, 5, 3); },
                                {"narrow", "[5, 8)", "size 7", "[2,7]"});
  expect_throw_with<ShapeError>([&] { narrow(x, 0, -1, 1); }, {"narrow", "[-1, 0)", "size 2"});
  expect_throw_with<ShapeError>([&] { narrow(x, 0, 1, -1); }, {"narrow", "size 2"});
}

TEST(Errors, LayerNormAffineOfTheWrongSize) {
  const Tensor x = Tensor::zeros({2, 3});
  expect_throw_with<ShapeError>([&] { layer_norm(x, Tensor::ones({5}), Tensor()); },
                                {"layer_norm", "weight", "[5]", "[2,3]", "expected [3]"});
  expect_throw_with<ShapeError>([&] { layer_norm(x, Tensor(), Tensor::ones({2})); },
                                {"layer_norm", "bias", "[2]", "[2,3]"});
  // A [1, 3] weight has the right count but not the right shape.
  expect_throw_with<ShapeError>(
      [&] {
        layer_norm(x, Tensor::ones({1, 3}), Tensor());
      },
      {"layer_norm", "weight", "[1,3]"});
}

TEST(Errors, CrossEntropyTargetsOfTheWrongShape) {
  expect_throw_with<ShapeError>(
      [] {
        cross_entropy(Tensor::zeros({2, 3}), Indices({3}, {0, 1, 2}));
      },
      {"cross_entropy", "[3]", "[2,3]", "expected [2]"});
}

TEST(Errors, MaskedFillMaskThatDoesNotFit) {
  const Tensor x = Tensor::zeros({2, 3});
  // [2, 1, 3] broadcasts with [2, 3] but to a larger shape than the input's.
  expect_throw_with<ShapeError>(
      [&] {
        masked_fill(x, Mask({2, 1, 3}, {0, 0, 0, 0, 0, 0}), 1);
      },
      {"masked_fill", "[2,1,3]", "[2,3]"});
  expect_throw_with<ShapeError>(
      [&] {
        masked_fill(x, Mask({2}, {0, 1}), 1);
      },
      {"masked_fill", "[2,3]", "[2]"});
}

TEST(Errors, ValueCountsThatDoNotFillTheShape) {
  expect_throw_with<ShapeError>(
      [] {
        Tensor::from_vector(std::vector<double>{1, 2, 3, 4, 5}, {2, 3});
      },
      {"from_vector", "5", "[2,3]"});
  expect_throw_with<ShapeError>([] { Indices({2, 3}, {0, 1}); }, {"2 values", "[2,3]"});
  expect_throw_with<ShapeError>([] { tensor({{1, 2, 3}, {4, 5}}); }, {"ragged", "expected 3"});
}

TEST(Errors, ItemOfAMultiElementTensor) {
  expect_throw_with<ShapeError>([] { Tensor::zeros({2, 3}).item(); }, {"item", "[2,3]", "6"});
}

TEST(Errors, ReducingAnEmptyAxis) {
  expect_throw_with<ShapeError>([] { max(Tensor::zeros({2, 0}), 1); }, {"max", "empty", "[2,0]"});
  expect_throw_with<ShapeError>([] { argmax(Tensor::zeros({0, 3}), 0); }, {"argmax", "[0,3]"});
}

// --- Axes -----------------------------------------------------------------------------------

TEST(Errors, AxisOutOfRange) {
  const Tensor x = Tensor::zeros({2, 3, 5});
  expect_throw_with<AxisError>([&] { sum(x, {3}); }, {"sum", "axis 3", "rank 3"});
  expect_throw_with<AxisError>([&] { mean(x, {-4}); }, {"mean", "axis -4", "rank 3"});
  expect_throw_with<AxisError>([&] { softmax(x, 3); }, {"softmax", "axis 3"});
  expect_throw_with<AxisError>([&] { log_softmax(x, -4); }, {"log_softmax", "axis -4"});
  expect_throw_with<AxisError>([&] { max(x, 5); }, {"max", "axis 5"});
  expect_throw_with<AxisError>([&] { argmax(x, -7); }, {"argmax", "axis -7"});
  expect_throw_with<AxisError>([&] { transpose(x, 0, 3); }, {"transpose", "axis 3"});
  expect_throw_with<AxisError>([&] { narrow(x, 3, 0, 1); }, {"narrow", "axis 3"});
  expect_throw_with<AxisError>([&] { concat({x, x}, 4); }, {"concat", "axis 4"});
  expect_throw_with<AxisError>([&] { x.size(3); }, {"size", "axis 3"});
  // A rank-0 tensor has no axis at all.
  expect_throw_with<AxisError>([] { softmax(Tensor::scalar(1), 0); }, {"softmax", "rank 0"});
}

TEST(Errors, RepeatedOrInvalidAxes) {
  const Tensor x = Tensor::zeros({2, 3, 5});
  // 1 and -2 are the same axis of a rank-3 tensor.
  expect_throw_with<AxisError>([&] { sum(x, {1, -2}); }, {"sum", "axis", "repeated"});
  expect_throw_with<AxisError>([&] { permute(x, {0, 0, 1}); }, {"permute", "[0,0,1]", "[2,3,5]"});
  expect_throw_with<AxisError>([&] { permute(x, {0, 1}); }, {"permute", "[0,1]"});
  expect_throw_with<AxisError>([&] { permute(x, {0, 1, 3}); }, {"permute", "[0,1,3]"});
}

// --- Dtypes ---------------------------------------------------------------------------------

TEST(Errors, DTypeMismatchNamesBothDtypes) {
  const Tensor f = Tensor::zeros({2, 3}), d = Tensor::zeros({2, 3}, DType::Float64);
  expect_throw_with<DTypeError>([&] { f + d; }, {"add", "float32", "float64"});
  expect_throw_with<DTypeError>([&] { d* f; }, {"mul", "float64", "float32"});
  expect_throw_with<DTypeError>(
      [&] {
        matmul(f, Tensor::zeros({3, 5}, DType::Float64));
      },
      {"matmul", "float32", "float64"});
  expect_throw_with<DTypeError>([&] { concat({f, d}, 0); }, {"concat", "float32", "float64"});
  expect_throw_with<DTypeError>(
      [&] {
        where(Mask({3}, {1, 0, 1}), f, d);
      },
      {"where", "float32", "float64"});
  expect_throw_with<DTypeError>([&] { layer_norm(f, Tensor::ones({3}, DType::Float64), Tensor()); },
                                {"layer_norm", "float32", "float64"});
  Tensor target = Tensor::zeros({2, 3});
  expect_throw_with<DTypeError>([&] { target.copy_from(d); }, {"copy_from", "float64"});
}

TEST(Errors, DataOfTheWrongType) {
  const Tensor f = Tensor::zeros({2, 3});
  expect_throw_with<DTypeError>([&] { f.data<double>(); }, {"data", "float32", "float64"});
  const Tensor d = Tensor::zeros({2}, DType::Float64);
  expect_throw_with<DTypeError>([&] { d.data<float>(); }, {"data", "float64", "float32"});
  Tensor writable = Tensor::zeros({2});
  expect_throw_with<DTypeError>([&] { writable.mutable_data<double>(); },
                                {"mutable_data", "float32", "float64"});
}

// --- Ids and targets --------------------------------------------------------------------------

TEST(Errors, EmbeddingIdOutOfRange) {
  const Tensor weight = Tensor::zeros({5, 3});
  expect_throw_with<IndexError>(
      [&] {
        embedding(weight, Indices({2}, {0, 5}));
      },
      {"embedding", "id 5", "position 1", "[0, 5)"});
  expect_throw_with<IndexError>(
      [&] {
        embedding(weight, Indices({2, 1}, {-1, 2}));
      },
      {"embedding", "id -1", "position 0"});
  expect_throw_with<ShapeError>([] { embedding(Tensor::zeros({5}), Indices({1}, {0})); },
                                {"embedding", "[5]"});
}

TEST(Errors, CrossEntropyTargetOutOfRange) {
  const Tensor logits = Tensor::zeros({2, 3});
  expect_throw_with<IndexError>(
      [&] {
        cross_entropy(logits, Indices({2}, {1, 3}));
      },
      {"cross_entropy", "target 3", "position 1", "[0, 3)"});
  // -1 is out of range unless it is the ignore_index.
  expect_throw_with<IndexError>(
      [&] {
        cross_entropy(logits, Indices({2}, {-1, 0}));
      },
      {"cross_entropy", "target -1", "position 0"});
  EXPECT_NO_THROW(cross_entropy(logits, Indices({2}, {-1, 0}), -1));
}

// --- Configuration ----------------------------------------------------------------------------

TEST(Errors, DropoutProbabilityOutsideTheUnitInterval) {
  Generator gen(0);
  const Tensor x = Tensor::ones({2, 3});
  expect_throw_with<ConfigError>([&] { dropout(x, 1.5, true, gen); }, {"dropout", "1.5", "[0, 1)"});
  expect_throw_with<ConfigError>([&] { dropout(x, -0.1, true, gen); }, {"dropout", "-0.1"});
  // p = 1 would divide by zero when scaling.
  expect_throw_with<ConfigError>([&] { dropout(x, 1.0, true, gen); }, {"dropout", "[0, 1)"});
  expect_throw_with<ConfigError>(
      [&] { dropout(x, std::numeric_limits<double>::quiet_NaN(), true, gen); }, "dropout");
  // The probability is validated in evaluation mode as well.
  expect_throw_with<ConfigError>([&] { dropout(x, 1.5, false, gen); }, "dropout");
}

// --- Graph misuse -------------------------------------------------------------------------------

TEST(Errors, GraphMisuse) {
  Tensor x = tensor({1, 2}).set_requires_grad();
  const Tensor y = sum(exp(x));
  y.backward();
  expect_throw_with<GraphError>([&] { y.backward(); }, {"backward", "sum", "retain_graph"});
  expect_throw_with<GraphError>([] { Tensor().shape(); }, "undefined");
  Tensor z = x * 2.0;
  expect_throw_with<GraphError>([&] { z.set_requires_grad(); },
                                {"set_requires_grad", "leaf", "mul_scalar"});
}

TEST(Errors, InputErrorsShareOneBaseClass) {
  // Callers can catch every bad-input error as gradlab::Error (a std::invalid_argument), and
  // graph misuse separately as a std::logic_error.
  auto kind = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error&) {
      return "input";
    } catch (const GraphError&) {
      return "graph";
    }
    return "none";
  };
  EXPECT_EQ(kind([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros({5, 7})); }), "input");
  EXPECT_EQ(kind([] { sum(Tensor::zeros({2}), {1}); }), "input");
  EXPECT_EQ(kind([] { Tensor::zeros({2}).data<double>(); }), "input");
  EXPECT_EQ(kind([] { embedding(Tensor::zeros({2, 3}), Indices({1}, {2})); }), "input");
  EXPECT_EQ(kind([] {
              Generator g(0);
              dropout(Tensor::zeros({2}), 2.0, true, g);
            }),
            "input");
  EXPECT_EQ(kind([] { sum(tensor({1})).backward(); }), "graph");
}

}  // namespace test_errors
}  // namespace gradlab
