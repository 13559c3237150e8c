// Interventions (interp/intervention.h) against what they must equal, in float64: project-out
// and keep of one subspace add up to the activation, keep of the whole space and of rows that are
// not orthonormal changes nothing, a zeroed head is ablate's knock-out, and bad specs name what
// is wrong.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "autograd/error.h"
#include "autograd/ops.h"
#include "autograd/shape_ops.h"
#include "interp/ablation.h"
#include "interp/intervention.h"
#include "nn/models.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_intervention {

using interp::Intervention;
using nn::SequenceBatch;
using nn::SequenceModel;

constexpr double kTolerance = 1e-10;
constexpr const char* kPoint = "blocks.1.hook_resid_pre";  // [B, T, C], C = 12

double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  double most = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    most = std::max(most, std::abs(x[i] - y[i]));
  return most;
}

std::shared_ptr<SequenceModel> float64_model() {
  nn::ModelConfig config{.vocab_size = 11,
                         .max_len = 9,
                         .d_model = 12,
                         .num_layers = 2,
                         .seed = 5,
                         .attention = {.num_heads = 4},
                         .feed_forward = {.d_ff = 20}};
  std::shared_ptr<SequenceModel> model = nn::make_sequence_model("decoder", config);
  model->to(DType::Float64);
  model->eval();
  return model;
}

SequenceBatch batch_of(const SequenceModel& m) {
  return m.make_batch(Indices({2, 7}, {1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 0, 4, 5, 6}), 3);
}

// A matrix [rows, width] written as the dataset `name` of a new HDF5 file.
void write_matrix(const std::string& path, const std::string& name,
                  const std::vector<double>& values, hsize_t rows, hsize_t width) {
  H5::H5File file(path, H5F_ACC_TRUNC);
  const hsize_t dims[2] = {rows, width};
  H5::DataSet set = file.createDataSet(name, H5::PredType::IEEE_F64LE, H5::DataSpace(2, dims));
  set.write(values.data(), H5::PredType::NATIVE_DOUBLE);
}

// Rows that span a 3-dimensional subspace S of R^12 within e_0, e_1, e_2: not orthonormal, and the
// fourth a multiple of the first (it adds no direction).
std::vector<double> subspace_rows() {
  std::vector<double> v(4 * 12, 0.0);
  v[0 * 12 + 0] = 2.0;
  v[0 * 12 + 1] = 1.0;
  v[1 * 12 + 1] = 3.0;
  v[1 * 12 + 2] = -1.0;
  v[2 * 12 + 0] = 2.0;
  v[2 * 12 + 1] = 4.0;
  v[2 * 12 + 2] = 0.5;
  v[3 * 12 + 0] = -4.0;
  v[3 * 12 + 1] = -2.0;
  return v;
}
// Rows spanning S's orthogonal complement, e_3 .. e_11, scaled (not orthonormal either).
std::vector<double> complement_rows() {
  std::vector<double> v(9 * 12, 0.0);
  for (int r = 0; r < 9; ++r) v[static_cast<size_t>(r * 12 + 3 + r)] = 1.0 + r;
  return v;
}

class InterventionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_matrix(tmp.file("s.h5"), "s", subspace_rows(), 4, 12);
    write_matrix(tmp.file("perp.h5"), "perp", complement_rows(), 9, 12);
  }
  // The activation at kPoint with the specs applied there (and before it).
  Tensor at_point(const std::vector<std::string>& specs) {
    std::vector<Intervention> interventions;
    for (const std::string& spec : specs) {
      interventions.push_back(interp::parse_intervention(spec));
    }
    nn::CacheOptions options;
    options.hooks = interp::intervention_hooks(*model, batch, interventions, [] {});
    return nn::run_with_cache(*model, batch, kPoint, options).at(kPoint);
  }
  std::string spec(const std::string& kind, const std::string& file) {
    return std::string(kPoint) + "=" + kind + ":" + tmp.file(file + ".h5") + "#" + file;
  }
  TempDir tmp;
  std::shared_ptr<SequenceModel> model = float64_model();
  SequenceBatch batch = batch_of(*model);
};

TEST_F(InterventionTest, ProjectOutAndKeepOfOneSubspaceAddUpToTheActivation) {
  const Tensor intact = at_point({});
  const Tensor removed = at_point({spec("project-out", "s")});
  const Tensor kept = at_point({spec("keep", "s")});
  EXPECT_GT(max_abs_diff(removed, intact), 1e-3) << "the subspace carries something";
  EXPECT_GT(max_abs_diff(kept, Tensor::zeros(kept.shape(), kept.dtype())), 1e-3);
  EXPECT_LT(max_abs_diff(removed + kept, intact), kTolerance);
}

TEST_F(InterventionTest, ProjectOutThenKeepOfTheComplementIsTheProjectionOut) {
  // x - P x lies in S's complement already, so keeping that complement changes nothing more;
  // and keeping the complement alone removes S.
  const Tensor removed = at_point({spec("project-out", "s")});
  EXPECT_LT(max_abs_diff(at_point({spec("project-out", "s"), spec("keep", "perp")}), removed),
            kTolerance);
  EXPECT_LT(max_abs_diff(at_point({spec("keep", "perp")}), removed), kTolerance);
  // S and its complement together span everything: the two kept parts add up to the activation.
  EXPECT_LT(
      max_abs_diff(at_point({spec("keep", "s")}) + at_point({spec("keep", "perp")}), at_point({})),
      kTolerance);
}

TEST_F(InterventionTest, ZeroOfAHeadIsAblatesKnockOut) {
  const std::string point = "blocks.0.attn.hook_z";
  std::vector<Intervention> ours{interp::parse_intervention(point + ":1=zero")};
  const Tensor intervened =
      nn::run_with_hooks(*model, batch, interp::intervention_hooks(*model, batch, ours, [] {}));
  const Tensor ablated = nn::run_with_hooks(
      *model, batch, interp::knock_out({{point, 1}}, interp::AblationMode::zero, {}));
  EXPECT_EQ(max_abs_diff(intervened, ablated), 0.0);
  EXPECT_GT(max_abs_diff(intervened, nn::run_with_hooks(*model, batch, {})), 1e-6);
}

TEST_F(InterventionTest, MeanIsTheHeldOutMeanAtEachPosition) {
  // Both sequences' activation becomes their average over axis B.
  std::vector<Intervention> ours{interp::parse_intervention(std::string(kPoint) + "=mean")};
  nn::CacheOptions options;
  options.hooks = interp::intervention_hooks(*model, batch, ours, [&] { model->loss(batch); });
  const Tensor mean = nn::run_with_cache(*model, batch, kPoint, options).at(kPoint);
  const Tensor intact = at_point({});
  const Tensor expected = (narrow(intact, 0, 0, 1) + narrow(intact, 0, 1, 1)) * 0.5;
  EXPECT_LT(max_abs_diff(narrow(mean, 0, 0, 1), expected), kTolerance);
  EXPECT_LT(max_abs_diff(narrow(mean, 0, 1, 1), expected), kTolerance);
}

TEST_F(InterventionTest, BadSpecsSayWhatIsWrong) {
  auto error_of = [](const std::string& spec) {
    try {
      interp::parse_intervention(spec);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_TRUE(contains(error_of("blocks.0.hook_resid_pre"), "expected POINT[:HEAD]=KIND"));
  const std::string bad_kind = error_of("blocks.0.hook_resid_pre=halve");
  EXPECT_TRUE(contains(bad_kind, "'blocks.0.hook_resid_pre=halve'")) << bad_kind;
  EXPECT_TRUE(contains(bad_kind, "unknown kind 'halve'")) << bad_kind;
  EXPECT_TRUE(contains(error_of("x:one=zero"), "head 'one' is not a number"));
  EXPECT_TRUE(contains(error_of("x=zero:1"), "zero takes no argument"));
  EXPECT_TRUE(contains(error_of("x=keep:" + tmp.file("s.h5")), "needs FILE.h5#DATASET"));
  EXPECT_TRUE(contains(error_of("x=keep:" + tmp.file("none.h5") + "#s"), "no such file"));
  const std::string no_dataset = error_of("x=keep:" + tmp.file("s.h5") + "#t");
  EXPECT_TRUE(contains(no_dataset, "/t")) << no_dataset;

  auto hooks_error = [&](const std::string& spec) {
    try {
      interp::intervention_hooks(*model, batch, {interp::parse_intervention(spec)}, [] {});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string unknown = hooks_error("blocks.0.hook_resid_pro=zero");
  EXPECT_TRUE(contains(unknown, "matches no hook point")) << unknown;
  EXPECT_TRUE(contains(unknown, "blocks.0.hook_resid_pre")) << unknown;
  const std::string wide = hooks_error("blocks.0.attn.hook_z=keep:" + tmp.file("s.h5") + "#s");
  EXPECT_TRUE(contains(wide, "[4,12]")) << wide;
  EXPECT_TRUE(contains(wide, "[1,6,4,3]")) << wide;
  EXPECT_TRUE(contains(hooks_error("blocks.0.attn.hook_z:4=zero"), "past"));
  EXPECT_TRUE(contains(hooks_error("blocks.0.hook_resid_pre:0=zero"), "has no head axis"));
}

}  // namespace test_intervention
}  // namespace gradlab::testing
