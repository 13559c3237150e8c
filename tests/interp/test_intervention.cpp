// Interventions (interp/intervention.h) against what they must equal, in float64: project-out
// and keep of one subspace add up to the activation, keep of the whole space changes nothing, a
// zeroed head is ablate's knock-out, resample and value put the activations they name, a
// replaced parameter is restored, and bad specs name what is wrong.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>

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

// An array of shape dims written as the dataset `name` of a new HDF5 file.
void write_array(const std::string& path, const std::string& name,
                 const std::vector<double>& values, const std::vector<hsize_t>& dims) {
  H5::H5File file(path, H5F_ACC_TRUNC);
  H5::DataSet set = file.createDataSet(name, H5::PredType::IEEE_F64LE,
                                       H5::DataSpace(static_cast<int>(dims.size()), dims.data()));
  set.write(values.data(), H5::PredType::NATIVE_DOUBLE);
}

void write_matrix(const std::string& path, const std::string& name,
                  const std::vector<double>& values, hsize_t rows, hsize_t width) {
  write_array(path, name, values, {rows, width});
}

// A tensor's values written as the dataset `name` of a new HDF5 file.
void write_tensor(const std::string& path, const std::string& name, const Tensor& t) {
  std::vector<hsize_t> dims(t.shape().begin(), t.shape().end());
  write_array(path, name, t.to_vector(), dims);
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
  EXPECT_TRUE(contains(unknown, "neither a hook point nor a parameter")) << unknown;
  EXPECT_TRUE(contains(unknown, "blocks.0.hook_resid_pre")) << unknown;
  const std::string wide = hooks_error("blocks.0.attn.hook_z=keep:" + tmp.file("s.h5") + "#s");
  EXPECT_TRUE(contains(wide, "[4,12]")) << wide;
  EXPECT_TRUE(contains(wide, "[1,6,4,3]")) << wide;
  EXPECT_TRUE(contains(hooks_error("blocks.0.attn.hook_z:4=zero"), "past"));
  EXPECT_TRUE(contains(hooks_error("blocks.0.hook_resid_pre:0=zero"), "has no head axis"));
}

// Specs a user or a program could give by mistake or on purpose: each a ConfigError of one line
// that quotes the spec and says what is wrong (fuzz/fuzz_intervene.cpp fuzzes the same parser).
TEST_F(InterventionTest, HostileSpecsGetAClearErrorEveryTime) {
  write_matrix(tmp.file("nan.h5"), "nan", {1.0, std::nan(""), 0.0, 1.0}, 2, 2);
  write_matrix(tmp.file("inf.h5"), "inf", {1.0, 0.0, -HUGE_VAL, 1.0}, 2, 2);
  const std::string s = tmp.file("s.h5");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "expected POINT[:HEAD]=KIND"},
      {"blocks.0.hook_resid_pre", "expected POINT[:HEAD]=KIND"},
      {"=zero", "no hook point before '='"},
      {"=", "no hook point before '='"},
      {"x=", "unknown kind ''"},
      {"x=halve", "unknown kind 'halve'"},
      {"x=zero junk", "unknown kind 'zero junk'"},
      {"x=zero=mean", "unknown kind 'zero=mean'"},
      {"x=zero:1", "zero takes no argument"},
      {"x:99999999999999999999=zero", "head '99999999999999999999' is not a number"},
      {"x:nan=zero", "head 'nan' is not a number"},
      {"x:-1=zero", "head '-1' is not a number"},
      {"x:=zero", "head '' is not a number"},
      {"x=keep", "keep needs FILE.h5#DATASET"},
      {"x=keep:" + s + "#", "keep needs FILE.h5#DATASET"},
      {"x=value:#s", "value needs FILE.h5#DATASET"},
      {"x=keep:" + s + "#s#junk", "no such file"},
      {"x=keep:" + s + "\n#s", "no such file"},
      {std::string("x=keep:") + s + std::string(1, '\0') + "junk#s", "a NUL character"},
      {"x=keep:" + tmp.file("nan.h5") + "#nan", "holds nan at index 1: only finite values"},
      {"x=value:" + tmp.file("inf.h5") + "#inf", "holds -inf at index 2: only finite values"},
      {"x=keep:" + tmp.path().string() + "#s", "no such file"},
      {"x=keep:" + tmp.file("bad.h5") + "#s", "not a readable HDF5 file"},
  };
  std::ofstream(tmp.file("bad.h5")) << "\x89HDF\r\n\x1a\n not really";
  // HDF5's default, its error stack printed to stderr, as a process starts with it (an earlier
  // test's checkpoint read may have turned it off).
  H5E_auto2_t saved_print;
  void* saved_data;
  H5Eget_auto2(H5E_DEFAULT, &saved_print, &saved_data);
  H5Eset_auto2(H5E_DEFAULT, reinterpret_cast<H5E_auto2_t>(H5Eprint2), stderr);
  for (const auto& [spec, reason] : cases) {
    SCOPED_TRACE(spec);
    std::string what = "accepted";
    ::testing::internal::CaptureStderr();
    try {
      interp::parse_intervention(spec);
    } catch (const ConfigError& e) {
      what = e.what();
    }
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
    EXPECT_TRUE(what.starts_with("--intervene '")) << what;
    EXPECT_TRUE(contains(what, reason)) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  H5Eset_auto2(H5E_DEFAULT, saved_print, saved_data);
}

TEST_F(InterventionTest, KeepOfTheWholeSpaceChangesNothing) {
  std::vector<double> identity(12 * 12, 0.0);
  for (int i = 0; i < 12; ++i) identity[static_cast<size_t>(i * 13)] = 1.0;
  write_matrix(tmp.file("all.h5"), "all", identity, 12, 12);
  EXPECT_LT(max_abs_diff(at_point({spec("keep", "all")}), at_point({})), kTolerance);
}

TEST_F(InterventionTest, ResampleTakesTheNextHeldOutSequence) {
  // Held-out set = batch (N = 2): sequence 0 takes sequence 1's activation and 1 takes 0's.
  const std::vector<Intervention> ours{
      interp::parse_intervention(std::string(kPoint) + "=resample")};
  const Tensor intact = at_point({});
  nn::CacheOptions options;
  options.hooks = interp::intervention_hooks(*model, batch, ours, [&] { model->loss(batch); });
  const Tensor resampled = nn::run_with_cache(*model, batch, kPoint, options).at(kPoint);
  EXPECT_EQ(max_abs_diff(narrow(resampled, 0, 0, 1), narrow(intact, 0, 1, 1)), 0.0);
  EXPECT_EQ(max_abs_diff(narrow(resampled, 0, 1, 1), narrow(intact, 0, 0, 1)), 0.0);
  // One shorter sequence (a prompt) takes held-out sequence 1 at its first positions.
  const SequenceBatch prompt{{}, Indices({1, 4}, {1, 2, 3, 0}), Indices({1, 4}, {2, 3, 0, 4})};
  const Tensor short_run = nn::run_with_cache(*model, prompt, kPoint, options).at(kPoint);
  EXPECT_EQ(max_abs_diff(short_run, narrow(narrow(intact, 0, 1, 1), 1, 0, 4)), 0.0);
}

TEST_F(InterventionTest, ValueSetsTheActivationOrOneHeadToTheStoredArray) {
  const Tensor intact = at_point({});
  // [T, C]: the same for both sequences.
  write_tensor(tmp.file("v.h5"), "v", reshape(narrow(intact, 0, 1, 1), {6, 12}));
  const Tensor shared = at_point({spec("value", "v")});
  EXPECT_EQ(max_abs_diff(narrow(shared, 0, 0, 1), narrow(intact, 0, 1, 1)), 0.0);
  EXPECT_EQ(max_abs_diff(narrow(shared, 0, 1, 1), narrow(intact, 0, 1, 1)), 0.0);
  // [B, T, C]: one per sequence (here the sequences swapped).
  write_tensor(tmp.file("vb.h5"), "vb",
               concat({narrow(intact, 0, 1, 1), narrow(intact, 0, 0, 1)}, 0));
  const Tensor swapped = at_point({spec("value", "vb")});
  EXPECT_EQ(max_abs_diff(narrow(swapped, 0, 0, 1), narrow(intact, 0, 1, 1)), 0.0);
  // One head of hook_z [B, T, H, D]: the array is the head's slice [T, D]; the others stay.
  const std::string z = "blocks.0.attn.hook_z";
  write_tensor(tmp.file("h.h5"), "h", Tensor::full({6, 3}, 0.25, DType::Float64));
  const Tensor z_intact = nn::run_with_cache(*model, batch, z).at(z);
  nn::CacheOptions options;
  options.hooks = interp::intervention_hooks(
      *model, batch, {interp::parse_intervention(z + ":2=value:" + tmp.file("h.h5") + "#h")},
      [] {});
  const Tensor z_set = nn::run_with_cache(*model, batch, z, options).at(z);
  EXPECT_EQ(max_abs_diff(narrow(z_set, 2, 2, 1), Tensor::full({2, 6, 1, 3}, 0.25, DType::Float64)),
            0.0);
  EXPECT_EQ(max_abs_diff(narrow(z_set, 2, 0, 2), narrow(z_intact, 2, 0, 2)), 0.0);
  EXPECT_EQ(max_abs_diff(narrow(z_set, 2, 3, 1), narrow(z_intact, 2, 3, 1)), 0.0);
  // A shape that fits neither form: both shapes named.
  write_tensor(tmp.file("bad.h5"), "bad", Tensor::zeros({6, 5}, DType::Float64));
  try {
    interp::intervention_hooks(*model, batch, {interp::parse_intervention(spec("value", "bad"))},
                               [] {});
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "[6,5]")) << e.what();
    EXPECT_TRUE(contains(e.what(), "[1,6,12]")) << e.what();
  }
}

// Every parameter's values, by name.
std::map<std::string, std::vector<double>> parameter_values(const SequenceModel& m) {
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, tensor] : m.named_parameters()) out[name] = tensor.to_vector();
  return out;
}

TEST_F(InterventionTest, AParameterIsReplacedForTheScopeAndRestoredAfterItEvenOnAnError) {
  // The token embedding: every logit depends on it.
  const auto [name, weight] = model->named_parameters().front();
  const auto loaded = parameter_values(*model);
  const Tensor intact = nn::run_with_hooks(*model, batch, {});
  const Tensor half = weight.clone() * 0.5;
  write_tensor(tmp.file("w.h5"), "w", half);
  const std::vector<Intervention> ours{
      interp::parse_intervention(name + "=value:" + tmp.file("w.h5") + "#w")};
  {
    interp::AppliedInterventions applied(*model, batch, ours, [] {});
    EXPECT_EQ(max_abs_diff(model->parameter(name), half), 0.0);
    EXPECT_GT(max_abs_diff(nn::run_with_hooks(*model, batch, {}), intact), 1e-6);
  }
  EXPECT_EQ(parameter_values(*model), loaded);
  EXPECT_EQ(max_abs_diff(nn::run_with_hooks(*model, batch, {}), intact), 0.0);
  // An error inside the scope, and one while applying (the parameter replaced before a bad
  // point's error), leave the loaded values.
  EXPECT_THROW(
      {
        interp::AppliedInterventions applied(*model, batch, ours, [] {});
        throw std::runtime_error("the run failed");
      },
      std::runtime_error);
  EXPECT_EQ(parameter_values(*model), loaded);
  std::vector<Intervention> with_bad_point = ours;
  with_bad_point.push_back(interp::parse_intervention("blocks.0.hook_resid_pro=zero"));
  EXPECT_THROW(interp::AppliedInterventions(*model, batch, with_bad_point, [] {}), ConfigError);
  EXPECT_EQ(parameter_values(*model), loaded);
}

TEST_F(InterventionTest, ParameterErrorsNameWhatIsWrong) {
  const auto [name, weight] = model->named_parameters().back();
  write_tensor(tmp.file("w.h5"), "w", Tensor::zeros({3, 2}, DType::Float64));
  auto error_of = [&](const std::string& spec) {
    try {
      interp::AppliedInterventions applied(*model, batch, {interp::parse_intervention(spec)},
                                           [] {});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string shape = error_of(name + "=value:" + tmp.file("w.h5") + "#w");
  EXPECT_TRUE(contains(shape, "[3,2]")) << shape;
  EXPECT_TRUE(contains(shape, to_string(weight.shape()))) << shape;
  EXPECT_TRUE(contains(error_of(name + "=zero"), "only value:FILE.h5#DATASET")) << name;
  EXPECT_TRUE(contains(error_of(name + ":0=value:" + tmp.file("w.h5") + "#w"), "no heads"));
  const std::string neither = error_of(name + "x=zero");
  EXPECT_TRUE(contains(neither, "neither a hook point nor a parameter")) << neither;
  EXPECT_TRUE(contains(neither, name)) << neither;
}

TEST_F(InterventionTest, AnAppliedInterventionStaysInsideAnInstrumentsOwnCache) {
  const std::vector<Intervention> ours{interp::parse_intervention(std::string(kPoint) + "=zero")};
  interp::AppliedInterventions applied(*model, batch, ours, [] {});
  const Tensor cached = nn::run_with_cache(*model, batch, kPoint).at(kPoint);
  EXPECT_EQ(max_abs_diff(cached, Tensor::zeros(cached.shape(), cached.dtype())), 0.0);
}

}  // namespace test_intervention
}  // namespace gradlab::testing
