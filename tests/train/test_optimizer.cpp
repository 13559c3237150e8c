// Optimizers, learning-rate schedules and gradient clipping (train/optimizer.h), checked against
// tests/fixtures/optimizer_reference.h5 (torch.optim.SGD/Adam/AdamW and
// torch.nn.utils.clip_grad_norm_, written by scripts/make_optimizer_reference.py) and against
// values computed by hand. Every expected number comes from PyTorch or from the formulas written
// out here, never from gradlab itself.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "tests/reference.h"
#include "tests/test_helpers.h"
#include "train/optimizer.h"

namespace gradlab {
namespace test_optimizer {

using testing::Reference;
using train::clip_grad_norm;
using train::learning_rate;
using train::make_optimizer;
using train::OptimizerConfig;
using train::ScheduleConfig;

std::string optimizer_reference_path() {
  return GRADLAB_TEST_FIXTURES_DIR "/optimizer_reference.h5";
}

const std::vector<std::string> kOptimizerCases = {
    "adam", "adamw", "sgd_momentum", "sgd_momentum_skip", "sgd_nesterov", "sgd_plain"};
const std::vector<std::string> kScheduleCases = {"constant", "constant_warmup", "cosine",
                                                 "cosine_no_warmup", "noam"};
const std::vector<std::string> kClipCases = {"above", "at_limit", "below", "missing_grad"};
const std::vector<std::string> kParams = {"w", "b"};  // gradlab's order (the fixture's as well)

using testing::Tolerance;

// float64: torch and gradlab run the same operations in the same order, so only rounding
// (a fused multiply-add here or there) separates them. float32 runs are compared with the
// float64 reference, so they carry float32 rounding (relative 6e-8 per operation).
Tolerance tolerance_for(DType dtype) {
  return dtype == DType::Float64 ? Tolerance{1e-12, 1e-15} : Tolerance{2e-5, 1e-6};
}

// Largest |actual - expected| and largest |actual - expected| / |expected| (over nonzero
// expected values) seen by the reference tests, printed at the end of each for the record.
struct MaxDiff {
  double abs = 0.0;
  double rel = 0.0;
  void update(const Tensor& actual, const Tensor& expected) {
    const std::vector<double> a = actual.to_vector();
    const std::vector<double> e = expected.to_vector();
    for (size_t i = 0; i < a.size() && i < e.size(); ++i) {
      const double d = std::abs(a[i] - e[i]);
      abs = std::max(abs, d);
      if (e[i] != 0.0) rel = std::max(rel, d / std::abs(e[i]));
    }
  }
};

// testing::expect_close, and the differences added to the record.
void expect_close_recorded(const Tensor& actual, const Tensor& expected, Tolerance tol,
                           const std::string& what, MaxDiff& diff) {
  testing::expect_close(actual, expected, tol, what);
  diff.update(actual, expected);
}

double scalar(const Reference& ref, const std::string& path) {
  return ref.tensor(path, DType::Float64).item();
}

OptimizerConfig config_of(const Reference& ref, const std::string& name) {
  OptimizerConfig config;
  config.name = ref.attr_string(name, "optimizer");
  config.nesterov = ref.attr_int(name, "nesterov") != 0;
  config.beta1 = scalar(ref, name + "/config/beta1");
  config.beta2 = scalar(ref, name + "/config/beta2");
  config.eps = scalar(ref, name + "/config/eps");
  config.weight_decay = scalar(ref, name + "/config/weight_decay");
  config.momentum = scalar(ref, name + "/config/momentum");
  return config;
}

std::vector<nn::NamedTensor> initial_params(const Reference& ref, const std::string& name,
                                            DType dtype) {
  std::vector<nn::NamedTensor> params;
  for (const std::string& p : kParams) {
    params.emplace_back(p, ref.tensor(name + "/initial/" + p, dtype).set_requires_grad());
  }
  return params;
}

// Sets the gradients of step k (1-based) from the fixture; a missing one means no gradient.
void set_grads(const Reference& ref, const std::string& name, int step,
               std::vector<nn::NamedTensor>& params, DType dtype) {
  for (auto& [p, t] : params) {
    const std::string path = name + "/grads/step" + std::to_string(step) + "/" + p;
    if (ref.has(path)) {
      t.set_grad(ref.tensor(path, dtype));
    } else {
      t.zero_grad();
    }
  }
}

void check_params(const Reference& ref, const std::string& name, int step,
                  const std::vector<nn::NamedTensor>& params, Tolerance tol, MaxDiff& diff) {
  for (const auto& [p, t] : params) {
    const std::string path = name + "/params/step" + std::to_string(step) + "/" + p;
    expect_close_recorded(t, ref.tensor(path, DType::Float64), tol, path, diff);
  }
}

// Runs the three steps of one fixture case and compares parameters after each step and the
// final optimizer state (names and values).
void check_optimizer_case(const std::string& name, DType dtype) {
  const Reference ref(optimizer_reference_path());
  const Tolerance tol = tolerance_for(dtype);
  const std::vector<double> lrs = ref.tensor(name + "/lrs", DType::Float64).to_vector();
  ASSERT_EQ(lrs.size(), 3u);

  std::vector<nn::NamedTensor> params = initial_params(ref, name, dtype);
  auto optimizer = make_optimizer(config_of(ref, name), params);
  MaxDiff diff;
  for (int step = 1; step <= 3; ++step) {
    set_grads(ref, name, step, params, dtype);
    optimizer->step(lrs[static_cast<size_t>(step - 1)]);
    EXPECT_EQ(optimizer->steps(), step);
    check_params(ref, name, step, params, tol, diff);
  }

  const std::vector<nn::NamedTensor> state = optimizer->state();
  std::vector<std::string> names;
  for (const auto& [state_name, t] : state) names.push_back(state_name);
  std::sort(names.begin(), names.end());
  const std::vector<std::string> expected_names =
      ref.has(name + "/state") ? ref.names(name + "/state") : std::vector<std::string>{};
  EXPECT_EQ(names, expected_names);
  for (const auto& [state_name, t] : state) {
    EXPECT_EQ(t.dtype(), dtype) << state_name;
    const std::string path = name + "/state/" + state_name;
    if (ref.has(path)) expect_close_recorded(t, ref.tensor(path, DType::Float64), tol, path, diff);
  }
  std::cout << "[ optimizer ] " << name << " " << dtype_name(dtype) << ": max abs diff vs torch "
            << diff.abs << ", max rel diff " << diff.rel << "\n";
}

class OptimizerReference : public ::testing::TestWithParam<std::string> {};

TEST_P(OptimizerReference, MatchesTorchFloat64) {
  check_optimizer_case(GetParam(), DType::Float64);
}

TEST_P(OptimizerReference, MatchesTorchFloat32) {
  check_optimizer_case(GetParam(), DType::Float32);
}

INSTANTIATE_TEST_SUITE_P(Cases, OptimizerReference, ::testing::ValuesIn(kOptimizerCases),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

TEST(OptimizerReferenceFixture, ListsExactlyTheCasesTested) {
  const Reference ref(optimizer_reference_path());
  std::vector<std::string> expected = kOptimizerCases;
  expected.push_back("clip");
  expected.push_back("schedules");
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(ref.cases(), expected);
  for (const std::string& name : kScheduleCases) {
    EXPECT_TRUE(ref.has("schedules/" + name + "/lr")) << name;
  }
  EXPECT_EQ(ref.names("schedules").size(), 4 * kScheduleCases.size());
  for (const std::string& name : kClipCases) EXPECT_TRUE(ref.has("clip/" + name + "/norm")) << name;
}

// A checkpoint restores the optimizer by copying saved state into state() and calling
// set_steps: a second optimizer resumed after two steps must finish with torch's third step.
TEST(OptimizerResume, CopiedStateAndStepCountContinueLikeTorch) {
  const Reference ref(optimizer_reference_path());
  const Tolerance tol = tolerance_for(DType::Float64);
  for (const std::string name : {"adam", "adamw", "sgd_nesterov"}) {
    SCOPED_TRACE(name);
    const std::vector<double> lrs = ref.tensor(name + "/lrs", DType::Float64).to_vector();
    std::vector<nn::NamedTensor> params = initial_params(ref, name, DType::Float64);
    auto first = make_optimizer(config_of(ref, name), params);
    for (int step = 1; step <= 2; ++step) {
      set_grads(ref, name, step, params, DType::Float64);
      first->step(lrs[static_cast<size_t>(step - 1)]);
    }

    std::vector<nn::NamedTensor> resumed_params;
    for (const auto& [p, t] : params) resumed_params.emplace_back(p, t.clone());
    auto second = make_optimizer(config_of(ref, name), resumed_params);
    const auto saved = first->state();
    const auto restored = second->state();
    ASSERT_EQ(saved.size(), restored.size());
    for (size_t i = 0; i < saved.size(); ++i) {
      ASSERT_EQ(saved[i].first, restored[i].first);
      Tensor target = restored[i].second;
      target.copy_from(saved[i].second);
    }
    second->set_steps(first->steps());

    set_grads(ref, name, 3, resumed_params, DType::Float64);
    second->step(lrs[2]);
    EXPECT_EQ(second->steps(), 3);
    MaxDiff diff;
    check_params(ref, name, 3, resumed_params, tol, diff);
  }
}

// --- State, steps and weight decay (hand-computed) ----------------------------------------

std::vector<nn::NamedTensor> matrix_and_vector(DType dtype) {
  return {{"layer.weight", Tensor::full({2, 3}, 2.0, dtype).set_requires_grad()},
          {"layer.bias", Tensor::full({3}, 1.0, dtype).set_requires_grad()}};
}

std::vector<std::string> state_names(const train::Optimizer& optimizer) {
  std::vector<std::string> names;
  for (const auto& [name, t] : optimizer.state()) names.push_back(name);
  return names;
}

TEST(OptimizerState, SlotsExistAsZerosFromConstruction) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    OptimizerConfig adam;
    adam.name = "adam";
    auto opt = make_optimizer(adam, matrix_and_vector(dtype));
    EXPECT_EQ(state_names(*opt),
              (std::vector<std::string>{"layer.weight/exp_avg", "layer.weight/exp_avg_sq",
                                        "layer.bias/exp_avg", "layer.bias/exp_avg_sq"}));
    for (const auto& [name, t] : opt->state()) {
      EXPECT_EQ(t.dtype(), dtype) << name;
      const std::vector<double> values = t.to_vector();
      EXPECT_TRUE(std::all_of(values.begin(), values.end(), [](double v) { return v == 0.0; }))
          << name;
    }
    EXPECT_EQ(opt->state()[0].second.shape(), (Shape{2, 3}));
    EXPECT_EQ(opt->state()[2].second.shape(), (Shape{3}));
    EXPECT_EQ(opt->steps(), 0);

    OptimizerConfig adamw;
    adamw.name = "adamw";
    EXPECT_EQ(state_names(*make_optimizer(adamw, matrix_and_vector(dtype))), state_names(*opt));

    OptimizerConfig momentum;
    momentum.name = "sgd";
    momentum.momentum = 0.9;
    EXPECT_EQ(
        state_names(*make_optimizer(momentum, matrix_and_vector(dtype))),
        (std::vector<std::string>{"layer.weight/momentum_buffer", "layer.bias/momentum_buffer"}));

    OptimizerConfig plain;
    plain.name = "sgd";
    EXPECT_TRUE(make_optimizer(plain, matrix_and_vector(dtype))->state().empty());
  }
}

TEST(OptimizerState, StateTensorsAreLive) {
  OptimizerConfig config;
  config.name = "sgd";
  config.momentum = 0.5;
  config.weight_decay = 0.0;
  auto params = matrix_and_vector(DType::Float64);
  auto opt = make_optimizer(config, params);
  const Tensor buffer = opt->state()[1].second;  // layer.bias/momentum_buffer
  EXPECT_EQ(opt->parameters().size(), 2u);
  EXPECT_TRUE(opt->parameters()[1].second.same(params[1].second));
  params[1].second.set_grad(Tensor::full({3}, 4.0, DType::Float64));
  opt->step(0.25);
  // First step: buffer = g = 4; p = 1 - 0.25 * 4 = 0.
  EXPECT_TRUE(opt->state()[1].second.same(buffer));
  EXPECT_EQ(buffer.to_vector(), (std::vector<double>{4.0, 4.0, 4.0}));
  EXPECT_EQ(params[1].second.to_vector(), (std::vector<double>{0.0, 0.0, 0.0}));
  // Overwriting the state (as a checkpoint load does) changes the next update:
  // buffer = 0.5 * 10 + 4 = 9; p = 0 - 0.25 * 9.
  Tensor restored = opt->state()[1].second;
  restored.copy_from(Tensor::full({3}, 10.0, DType::Float64));
  opt->step(0.25);
  EXPECT_EQ(params[1].second.to_vector(), (std::vector<double>{-2.25, -2.25, -2.25}));
}

TEST(OptimizerStep, SkipsParametersWithoutGradientButCountsTheStep) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    OptimizerConfig config;
    config.name = "adam";
    config.beta1 = 0.9;
    config.beta2 = 0.999;
    config.eps = 1e-8;
    config.weight_decay = 0.0;
    auto params = matrix_and_vector(dtype);
    auto opt = make_optimizer(config, params);
    params[1].second.set_grad(Tensor::full({3}, 0.5, dtype));
    opt->step(0.1);
    EXPECT_EQ(opt->steps(), 1);
    // The matrix had no gradient: untouched, and so is its state.
    EXPECT_EQ(params[0].second.to_vector(), std::vector<double>(6, 2.0));
    EXPECT_EQ(opt->state()[0].second.to_vector(), std::vector<double>(6, 0.0));
    EXPECT_EQ(opt->state()[1].second.to_vector(), std::vector<double>(6, 0.0));
    // First Adam step: mhat = g, vhat = g^2, so p = 1 - lr * g / (|g| + eps).
    const double expected = 1.0 - 0.1 * 0.5 / (0.5 + 1e-8);
    for (double v : params[1].second.to_vector()) {
      EXPECT_NEAR(v, expected, dtype == DType::Float64 ? 1e-15 : 1e-7);
    }
  }
}

// AdamW decays the weight matrices alone by default, every parameter with decay_all (torch's
// one group): a zero gradient leaves p (1 - lr wd) where decay applies, p where it does not.
TEST(OptimizerStep, DecayAllDecaysTheVectorsToo) {
  for (bool decay_all : {false, true}) {
    OptimizerConfig config;
    config.weight_decay = 0.5;
    config.decay_all = decay_all;
    auto params = matrix_and_vector(DType::Float64);
    auto opt = make_optimizer(config, params);
    for (auto& [name, p] : params) p.set_grad(Tensor::zeros(p.shape(), DType::Float64));
    opt->step(0.1);
    for (double v : params[0].second.to_vector()) EXPECT_NEAR(v, 2.0 * 0.95, 1e-15);
    for (double v : params[1].second.to_vector()) EXPECT_NEAR(v, decay_all ? 0.95 : 1.0, 1e-15);
  }
}

// The threads share every parameter's elements in one parallel region: each element is still
// updated by one thread alone, in the same arithmetic, so one and two threads agree bit for bit
// (parameters of odd sizes, in both element types, enough of them to be shared, one without a
// gradient).
TEST(OptimizerStep, OneAndTwoThreadsGiveTheSameBits) {
  auto run = [](const std::string& name, int threads) {
    omp_set_num_threads(threads);
    Generator gen(9);
    std::vector<nn::NamedTensor> params;
    const std::vector<std::pair<Shape, DType>> shapes{{{301, 97}, DType::Float32},
                                                      {{13}, DType::Float32},
                                                      {{211, 89}, DType::Float64},
                                                      {{40, 3}, DType::Float32}};
    for (size_t i = 0; i < shapes.size(); ++i) {
      Tensor p = Tensor::randn(shapes[i].first, gen, DType::Float64).to(shapes[i].second);
      p.set_requires_grad();
      // Not "p" + std::to_string(i): in a unity batch GCC 12 reports a false -Wrestrict there.
      params.emplace_back(std::string("p").append(std::to_string(i)), p);
    }
    OptimizerConfig config;
    config.name = name;
    config.momentum = 0.9;
    config.weight_decay = 0.1;
    auto opt = make_optimizer(config, params);
    std::vector<std::vector<double>> values;
    for (int step = 1; step <= 3; ++step) {
      for (size_t i = 0; i + 1 < params.size(); ++i) {
        Tensor& p = params[i].second;
        p.set_grad(Tensor::randn(p.shape(), gen, DType::Float64).to(p.dtype()));
      }
      opt->step(0.01 * step);
    }
    for (const auto& [name, p] : params) values.push_back(p.to_vector());
    for (const auto& [name, s] : opt->state()) values.push_back(s.to_vector());
    omp_set_num_threads(1);
    return values;
  };
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    const auto one = run(name, 1);
    const auto two = run(name, 2);
    EXPECT_EQ(one, two) << name;
    EXPECT_NE(one[0], run(name == "sgd" ? "adam" : "sgd", 1)[0]) << name;
  }
}

// A step refused part-way (a parameter converted after the optimizer was built) updates
// nothing, and the next step updates each parameter once.
TEST(OptimizerStep, ARefusedStepLeavesNothingForTheNext) {
  auto params_with_grads = [] {
    std::vector<nn::NamedTensor> params{{"a", Tensor::full({5}, 1.0, DType::Float32)},
                                        {"b", Tensor::full({4}, 2.0, DType::Float32)}};
    for (auto& [name, p] : params) p.set_requires_grad().set_grad(Tensor::full(p.shape(), 0.5));
    return params;
  };
  OptimizerConfig config;
  config.name = "sgd";
  config.momentum = 0.9;
  auto params = params_with_grads();
  auto opt = make_optimizer(config, params);
  Tensor& b = params[1].second;
  b.set_data(b.to(DType::Float64));
  b.set_grad(Tensor::full({4}, 0.5, DType::Float64));
  EXPECT_THROW(opt->step(0.1), DTypeError);
  EXPECT_EQ(params[0].second.to_vector(), std::vector<double>(5, 1.0));
  b.set_data(b.to(DType::Float32));
  b.set_grad(Tensor::full({4}, 0.5));
  opt->step(0.1);
  auto fresh = params_with_grads();
  make_optimizer(config, fresh)->step(0.1);
  EXPECT_EQ(params[0].second.to_vector(), fresh[0].second.to_vector());
  EXPECT_EQ(params[1].second.to_vector(), fresh[1].second.to_vector());
}

TEST(OptimizerStep, BiasCorrectionUsesTheGlobalStepCount) {
  OptimizerConfig config;
  config.name = "adam";
  config.beta1 = 0.8;
  config.beta2 = 0.9;
  config.eps = 1e-3;
  config.weight_decay = 0.0;
  auto params = matrix_and_vector(DType::Float64);
  auto opt = make_optimizer(config, params);
  opt->set_steps(9);
  params[1].second.set_grad(Tensor::full({3}, 2.0, DType::Float64));
  opt->step(0.5);
  EXPECT_EQ(opt->steps(), 10);
  // Zero moments, t = 10: m = 0.2 g, v = 0.1 g^2;
  // p = 1 - lr / (1 - 0.8^10) * m / (sqrt(v) / sqrt(1 - 0.9^10) + eps).
  const double g = 2.0;
  const double m = 0.2 * g;
  const double v = 0.1 * g * g;
  const double expected = 1.0 - 0.5 / (1.0 - std::pow(0.8, 10)) * m /
                                    (std::sqrt(v) / std::sqrt(1.0 - std::pow(0.9, 10)) + 1e-3);
  for (double p : params[1].second.to_vector()) EXPECT_NEAR(p, expected, 1e-14);
}

TEST(OptimizerStep, WeightDecayOnlyForMatrices) {
  EXPECT_TRUE(train::decays(Tensor::zeros({2, 3})));
  EXPECT_TRUE(train::decays(Tensor::zeros({2, 3, 4})));
  EXPECT_FALSE(train::decays(Tensor::zeros({3})));
  EXPECT_FALSE(train::decays(Tensor::scalar(1.0)));

  // AdamW with zero gradients: the moments stay zero, so the only change is the decoupled
  // decay p *= 1 - lr * wd = 1 - 0.1 * 0.5, applied to the matrix (2 -> 1.9) and not the bias.
  OptimizerConfig adamw;
  adamw.name = "adamw";
  adamw.weight_decay = 0.5;
  auto params = matrix_and_vector(DType::Float64);
  auto opt = make_optimizer(adamw, params);
  for (auto& [name, p] : params) p.set_grad(Tensor::zeros(p.shape(), DType::Float64));
  opt->step(0.1);
  for (double v : params[0].second.to_vector()) EXPECT_DOUBLE_EQ(v, 2.0 * (1.0 - 0.1 * 0.5));
  EXPECT_EQ(params[1].second.to_vector(), std::vector<double>(3, 1.0));

  // SGD: L2 decay g + wd p on the matrix only: 2 - 0.1 * (0 + 0.5 * 2) = 1.9.
  OptimizerConfig sgd;
  sgd.name = "sgd";
  sgd.weight_decay = 0.5;
  params = matrix_and_vector(DType::Float64);
  opt = make_optimizer(sgd, params);
  for (auto& [name, p] : params) p.set_grad(Tensor::zeros(p.shape(), DType::Float64));
  opt->step(0.1);
  for (double v : params[0].second.to_vector()) EXPECT_DOUBLE_EQ(v, 1.9);
  EXPECT_EQ(params[1].second.to_vector(), std::vector<double>(3, 1.0));
}

TEST(OptimizerStep, ZeroGradDropsEveryGradient) {
  OptimizerConfig config;
  auto params = matrix_and_vector(DType::Float32);
  auto opt = make_optimizer(config, params);
  for (auto& [name, p] : params) p.set_grad(Tensor::ones(p.shape()));
  opt->zero_grad();
  for (const auto& [name, p] : params) EXPECT_FALSE(p.grad().defined()) << name;
}

// --- Configuration errors -------------------------------------------------------------------

template <class F>
std::string config_error(F&& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no ConfigError)";
}

std::string optimizer_error(const OptimizerConfig& config) {
  return config_error([&] { make_optimizer(config, matrix_and_vector(DType::Float32)); });
}

TEST(OptimizerConfigErrors, NameTheFieldAndValue) {
  OptimizerConfig c;
  c.name = "rmsprop";
  EXPECT_EQ(optimizer_error(c),
            "optimizer: unknown optimizer 'rmsprop' (expected sgd, adam or adamw)");

  c = OptimizerConfig{};
  c.beta1 = 1.0;
  EXPECT_EQ(optimizer_error(c), "optimizer: beta1 must be in [0, 1), got 1");
  c = OptimizerConfig{};
  c.name = "adam";
  c.beta2 = -0.1;
  EXPECT_EQ(optimizer_error(c), "optimizer: beta2 must be in [0, 1), got -0.1");
  c = OptimizerConfig{};
  c.beta2 = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(optimizer_error(c), "optimizer: beta2 must be in [0, 1), got nan");
  c = OptimizerConfig{};
  c.eps = 0.0;
  EXPECT_EQ(optimizer_error(c), "optimizer: eps must be finite and > 0, got 0");
  c = OptimizerConfig{};
  c.weight_decay = -0.01;
  EXPECT_EQ(optimizer_error(c), "optimizer: weight_decay must be finite and >= 0, got -0.01");

  c = OptimizerConfig{};
  c.name = "sgd";
  c.momentum = -0.5;
  EXPECT_EQ(optimizer_error(c), "optimizer: momentum must be finite and >= 0, got -0.5");
  c = OptimizerConfig{};
  c.name = "sgd";
  c.nesterov = true;
  EXPECT_EQ(optimizer_error(c), "optimizer: nesterov requires momentum > 0, got momentum 0");
  c.momentum = 0.9;
  EXPECT_EQ(optimizer_error(c), "(no ConfigError)");

  // Hyperparameters of the other optimizer family are not looked at.
  c = OptimizerConfig{};
  c.name = "sgd";
  c.beta1 = 1.5;
  EXPECT_EQ(optimizer_error(c), "(no ConfigError)");

  auto opt = make_optimizer(OptimizerConfig{}, matrix_and_vector(DType::Float32));
  EXPECT_EQ(config_error([&] { opt->step(-1e-3); }),
            "optimizer: lr must be finite and >= 0, got -0.001");
  EXPECT_EQ(opt->steps(), 0);
}

// --- Schedules ------------------------------------------------------------------------------

ScheduleConfig schedule_of(const Reference& ref, const std::string& name) {
  const std::string group = "schedules/" + name;
  ScheduleConfig config;
  config.name = ref.attr_string(group, "name");
  config.warmup_steps = ref.attr_int(group, "warmup_steps");
  config.total_steps = ref.attr_int(group, "total_steps");
  config.d_model = ref.attr_int(group, "d_model");
  config.lr = scalar(ref, group + "/lr_peak");
  config.min_lr = scalar(ref, group + "/min_lr");
  return config;
}

TEST(ScheduleReference, MatchesTheFormulas) {
  const Reference ref(optimizer_reference_path());
  double max_rel = 0.0;
  for (const std::string& name : kScheduleCases) {
    SCOPED_TRACE(name);
    const ScheduleConfig config = schedule_of(ref, name);
    EXPECT_NO_THROW(train::validate(config));
    const std::vector<double> steps =
        ref.tensor("schedules/" + name + "/steps", DType::Float64).to_vector();
    const std::vector<double> lrs =
        ref.tensor("schedules/" + name + "/lr", DType::Float64).to_vector();
    ASSERT_EQ(steps.size(), lrs.size());
    for (size_t i = 0; i < steps.size(); ++i) {
      const double lr = learning_rate(config, static_cast<int64_t>(steps[i]));
      EXPECT_NEAR(lr, lrs[i], 1e-12 * std::abs(lrs[i])) << "step " << steps[i];
      max_rel = std::max(max_rel, std::abs(lr - lrs[i]) / std::abs(lrs[i]));
    }
  }
  std::cout << "[ schedule ] max rel diff vs the Python formulas " << max_rel << "\n";
}

TEST(ScheduleBoundaries, WarmupCosineAndNoamByHand) {
  ScheduleConfig constant;
  constant.name = "constant";
  constant.lr = 0.01;
  constant.warmup_steps = 4;
  EXPECT_DOUBLE_EQ(learning_rate(constant, 1), 0.0025);
  EXPECT_DOUBLE_EQ(learning_rate(constant, 3), 0.0075);
  EXPECT_EQ(learning_rate(constant, 4), 0.01);
  EXPECT_EQ(learning_rate(constant, 5), 0.01);
  EXPECT_EQ(learning_rate(constant, 1000000), 0.01);
  constant.warmup_steps = 0;
  EXPECT_EQ(learning_rate(constant, 1), 0.01);

  ScheduleConfig cosine;
  cosine.name = "cosine";
  cosine.lr = 0.01;
  cosine.min_lr = 0.001;
  cosine.warmup_steps = 10;
  cosine.total_steps = 110;
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 5), 0.005);    // warm-up goes to lr, not min_lr
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 10), 0.01);    // end of warm-up: the peak
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 60), 0.0055);  // halfway: (lr + min_lr) / 2
  // A quarter of the way: min + (lr - min) (1 + cos(pi / 4)) / 2.
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 35), 0.001 + 0.009 * 0.5 * (1.0 + std::sqrt(0.5)));
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 110), 0.001);  // the end
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 500), 0.001);  // clamped past the end
  cosine.total_steps = 10;  // no decay phase: the peak at the end of warm-up, then min_lr
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 10), 0.01);
  EXPECT_DOUBLE_EQ(learning_rate(cosine, 11), 0.001);

  // noam: lr d^-1/2 min(s^-1/2, s w^-3/2); with d = 64, w = 100 the peak (s = w) is
  // lr / 8 / 10, reached from below linearly and left as s^-1/2.
  ScheduleConfig noam;
  noam.name = "noam";
  noam.lr = 1.0;
  noam.d_model = 64;
  noam.warmup_steps = 100;
  EXPECT_DOUBLE_EQ(learning_rate(noam, 100), 1.0 / 80.0);
  EXPECT_DOUBLE_EQ(learning_rate(noam, 1), 1.0 / 8.0 / 1000.0);
  EXPECT_DOUBLE_EQ(learning_rate(noam, 50), 1.0 / 160.0);
  EXPECT_DOUBLE_EQ(learning_rate(noam, 400), 1.0 / 8.0 / 20.0);
}

std::string schedule_error(const ScheduleConfig& config, int64_t step = 1) {
  return config_error([&] { learning_rate(config, step); });
}

TEST(ScheduleErrors, NameTheFieldAndValue) {
  ScheduleConfig c;
  c.name = "linear";
  EXPECT_EQ(schedule_error(c),
            "schedule: unknown schedule 'linear' (expected constant, cosine or noam)");
  EXPECT_EQ(config_error([&] { train::validate(c); }), schedule_error(c));
  c = ScheduleConfig{};
  c.lr = 0.0;
  EXPECT_EQ(schedule_error(c), "schedule: lr must be finite and > 0, got 0");
  c = ScheduleConfig{};
  c.warmup_steps = -5;
  EXPECT_EQ(schedule_error(c), "schedule: warmup_steps must be >= 0, got -5");
  c = ScheduleConfig{};
  c.name = "cosine";
  c.warmup_steps = 200;
  c.total_steps = 100;
  EXPECT_EQ(schedule_error(c), "schedule: total_steps 100 is less than warmup_steps 200 (cosine)");
  c = ScheduleConfig{};
  c.name = "cosine";
  c.min_lr = 0.5;
  EXPECT_EQ(schedule_error(c),
            "schedule: min_lr must be in [0, lr] = [0, 0.003], got 0.5 (cosine)");
  c = ScheduleConfig{};
  c.name = "noam";
  c.warmup_steps = 0;
  EXPECT_EQ(schedule_error(c), "schedule: noam needs warmup_steps > 0, got 0");
  c = ScheduleConfig{};
  EXPECT_EQ(schedule_error(c, 0), "schedule: step must be >= 1 (steps are 1-based), got 0");
  // A constant schedule ignores total_steps.
  c.total_steps = 10;
  EXPECT_EQ(schedule_error(c), "(no ConfigError)");
}

// --- Clipping -------------------------------------------------------------------------------

TEST(ClipReference, MatchesTorchClipGradNorm) {
  const Reference ref(optimizer_reference_path());
  for (DType dtype : {DType::Float64, DType::Float32}) {
    const Tolerance tol = tolerance_for(dtype);
    MaxDiff diff;
    double max_norm_rel = 0.0;
    for (const std::string& name : kClipCases) {
      SCOPED_TRACE(name + " " + dtype_name(dtype));
      const std::string group = "clip/" + name;
      std::vector<Tensor> params;
      for (const std::string& p : kParams) {
        Tensor t = Tensor::zeros(p == "w" ? Shape{3, 5} : Shape{5}, dtype).set_requires_grad();
        if (ref.has(group + "/grads/" + p)) t.set_grad(ref.tensor(group + "/grads/" + p, dtype));
        params.push_back(t);
      }
      const double expected_norm = scalar(ref, group + "/norm");
      const double norm = clip_grad_norm(params, scalar(ref, group + "/max_norm"));
      EXPECT_NEAR(norm, expected_norm, tol.rtol * expected_norm);
      max_norm_rel = std::max(max_norm_rel, std::abs(norm - expected_norm) / expected_norm);
      for (size_t i = 0; i < kParams.size(); ++i) {
        const std::string path = group + "/clipped/" + kParams[i];
        if (ref.has(path)) {
          expect_close_recorded(params[i].grad(), ref.tensor(path, DType::Float64), tol, path,
                                diff);
        } else {
          EXPECT_FALSE(params[i].grad().defined()) << path;
        }
      }
    }
    std::cout << "[ clip ] " << dtype_name(dtype) << ": max abs diff of clipped grads vs torch "
              << diff.abs << ", max rel diff " << diff.rel << ", max rel diff of the norm "
              << max_norm_rel << "\n";
  }
}

TEST(ClipGradNorm, LeavesGradientsAloneUnderTheLimit) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    Tensor a = Tensor::zeros({2}, dtype).set_requires_grad();
    Tensor b = Tensor::zeros({2, 1}, dtype).set_requires_grad();
    Tensor no_grad = Tensor::zeros({3}, dtype).set_requires_grad();
    a.set_grad(tensor({3.0, 0.0}, dtype));
    b.set_grad(Tensor::from_vector(std::vector<double>{0.0, -4.0}, {2, 1}, dtype));
    const Tensor grad_a = a.grad();
    EXPECT_EQ(clip_grad_norm({a, b, no_grad}, 10.0), 5.0);
    EXPECT_TRUE(a.grad().same(grad_a));
    EXPECT_EQ(a.grad().to_vector(), (std::vector<double>{3.0, 0.0}));
    EXPECT_EQ(b.grad().to_vector(), (std::vector<double>{0.0, -4.0}));
    EXPECT_FALSE(no_grad.grad().defined());

    // Above the limit: scaled by 1 / (5 + 1e-6), to a norm just under 1.
    EXPECT_EQ(clip_grad_norm({a, b, no_grad}, 1.0), 5.0);
    const double coef = 1.0 / (5.0 + 1e-6);
    const double tol = dtype == DType::Float64 ? 1e-15 : 1e-7;
    EXPECT_NEAR(a.grad().at({0}), 3.0 * coef, tol);
    EXPECT_NEAR(b.grad().at({1, 0}), -4.0 * coef, tol);
    EXPECT_FALSE(no_grad.grad().defined());

    // No gradients at all: norm 0.
    EXPECT_EQ(clip_grad_norm({no_grad}, 1.0), 0.0);
  }
}

TEST(ClipGradNorm, NonFiniteNormLeavesGradientsAlone) {
  Tensor a = Tensor::zeros({2}, DType::Float64).set_requires_grad();
  a.set_grad(tensor({std::numeric_limits<double>::infinity(), 1.0}, DType::Float64));
  EXPECT_TRUE(std::isinf(clip_grad_norm({a}, 1.0)));
  EXPECT_EQ(a.grad().at({1}), 1.0);
}

TEST(ClipGradNorm, RejectsNonPositiveMaxNorm) {
  Tensor a = Tensor::zeros({2}).set_requires_grad();
  EXPECT_EQ(config_error([&] { clip_grad_norm({a}, 0.0); }),
            "clip_grad_norm: max_norm must be > 0, got 0");
  EXPECT_EQ(config_error([&] { clip_grad_norm({a}, -1.5); }),
            "clip_grad_norm: max_norm must be > 0, got -1.5");
}

}  // namespace test_optimizer
}  // namespace gradlab
