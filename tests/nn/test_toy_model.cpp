// The toy model of superposition (nn/toy_model.h): its reconstruction and loss on weights set by
// hand, its shape error, and the geometry of known arrangements of features (a pentagon, an
// antipodal pair, orthogonal features, a feature left out).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "autograd/ops.h"
#include "nn/toy_model.h"
#include "tests/test_helpers.h"

namespace gradlab::nn {
namespace test_toy_model {

using testing::contains;

// W [1, 2, n] whose column i points at angle degrees[i] with length lengths[i].
Tensor columns_at(const std::vector<double>& degrees, const std::vector<double>& lengths) {
  const int64_t n = static_cast<int64_t>(degrees.size());
  std::vector<double> w(static_cast<size_t>(2 * n));
  for (int64_t i = 0; i < n; ++i) {
    const double radians = degrees[i] * std::numbers::pi / 180.0;
    w[i] = lengths[i] * std::cos(radians);
    w[n + i] = lengths[i] * std::sin(radians);
  }
  return Tensor::from_vector(w, {1, 2, n}, DType::Float64);
}

TEST(ToyModel, ReconstructsThroughWAndItsTransposeWithTheWeightedLoss) {
  ToyModel model({.vocab_size = 3, .max_len = 2, .d_model = 2});
  EXPECT_EQ(model.weight.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(model.bias.shape(), (Shape{2, 3}));
  // Instance 0 keeps features 0 and 1 on the two axes and drops 2; instance 1 puts features 0
  // and 1 on one axis, and its bias lifts feature 2 by 0.25.
  model.weight.copy_from(tensor({{{1, 0, 0}, {0, 1, 0}}, {{1, 1, 0}, {0, 0, 0}}}));
  model.bias.copy_from(tensor({{0, 0, 0}, {0, 0, 0.25}}));
  SequenceBatch batch;
  batch.features = tensor({{{0.5, 0.25, 1}, {0.5, 0.25, 0}}});  // [B = 1, I = 2, n = 3]
  const Tensor out = model.forward(batch);
  testing::expect_exact(out, {1, 2, 3}, {0.5, 0.25, 0, 0.75, 0.75, 0.25});
  // Instance 0 misses feature 2 (error 1, importance 0.81); instance 1 errs by 0.25, 0.5, 0.25.
  const double expected = 0.81 * 1 + (0.0625 + 0.9 * 0.25 + 0.81 * 0.0625);
  EXPECT_NEAR(model.loss(batch).item(), expected, 1e-6);
  const std::vector<double> importance = model.importance().to_vector();
  ASSERT_EQ(importance.size(), 3u);
  EXPECT_EQ(importance[0], 1.0);
  EXPECT_NEAR(importance[1], 0.9, 1e-7);
  EXPECT_NEAR(importance[2], 0.81, 1e-7);
}

TEST(ToyModel, FeaturesOfTheWrongShapeNameBothShapes) {
  ToyModel model({.vocab_size = 5, .max_len = 3, .d_model = 2});
  SequenceBatch batch;
  batch.features = Tensor::zeros({4, 3, 6});
  try {
    model.forward(batch);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "tms: features [4,3,6] are not [B, I, n] for weight [3,2,5]"))
        << e.what();
  }
}

TEST(FeatureGeometry, APentagonAPairOrthogonalAxesAndAFeatureLeftOut) {
  const FeatureGeometry pentagon =
      feature_geometry(columns_at({90, 162, 234, 306, 18}, {1, 1, 1, 1, 1}));
  ASSERT_EQ(pentagon.norms.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_NEAR(pentagon.norms[i], 1.0, 1e-12);
    EXPECT_NEAR(pentagon.dimensionality[i], 0.4, 1e-12);  // 1 / (1 + 2 cos^2 72 + 2 cos^2 144)
  }
  EXPECT_NEAR(pentagon.angles[0], 90, 1e-9);
  EXPECT_NEAR(pentagon.angles[3], 306, 1e-9);

  const FeatureGeometry mixed = feature_geometry(columns_at({0, 90, 180, 45}, {1, 2, 1, 0}));
  // Feature 0 and 2 are an antipodal pair; 1 has the other axis; 3 is not represented.
  EXPECT_NEAR(mixed.dimensionality[0], 0.5, 1e-12);
  EXPECT_NEAR(mixed.dimensionality[2], 0.5, 1e-12);
  EXPECT_NEAR(mixed.dimensionality[1], 1.0, 1e-12);
  EXPECT_EQ(mixed.dimensionality[3], 0.0);
  EXPECT_NEAR(mixed.norms[1], 2.0, 1e-12);
  EXPECT_NEAR(mixed.angles[2], 180, 1e-9);
  EXPECT_THROW(feature_geometry(Tensor::zeros({2, 5})), ShapeError);
}

}  // namespace test_toy_model
}  // namespace gradlab::nn
