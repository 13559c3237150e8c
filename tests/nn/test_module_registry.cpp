// The registry of norms and feed-forwards (nn/module_registry.h): RMSNorm as a built-in row
// against a hand computation, a module registered by the test used by name in both built-in
// models (its parameters, its hook point, its gradient check), the registry's refusals, the
// final-norm option, and checkpoints that name a registered module or one this program lacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/models.h"
#include "nn/module_checks.h"
#include "nn/module_registry.h"
#include "tests/cli_runner.h"
#include "tests/program_checkpoint.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace gradlab::nn {
namespace test_module_registry {

using gradlab::testing::TempDir;

// A norm of the test's own: tanh(x) * gain, one gain per channel.
class TanhNorm : public Norm {
 public:
  explicit TanhNorm(int64_t dim) { gain = register_parameter("gain", Tensor::ones({dim})); }
  Tensor gain;

 protected:
  Tensor normalize(const Tensor& x) const override { return tanh(x) * gain; }
};

// A feed-forward of the test's own: one Linear, then tanh.
class TanhFeedForward : public Sublayer {
 public:
  TanhFeedForward(int64_t dim, Generator& gen) {
    proj = register_module("proj", std::make_shared<Linear>(dim, dim, gen));
  }
  Tensor forward(const Tensor& x) const override { return tanh(proj->forward(x)); }
  std::shared_ptr<Linear> proj;
};

constexpr const char* kTanhNorm = "test_tanh_norm";
constexpr const char* kTanhFeedForward = "test_tanh_ffn";

// Registers the test's modules once for the whole test program.
void register_test_modules() {
  static const bool registered = [] {
    register_norm(kTanhNorm, "tanh(x) * gain",
                  [](int64_t dim, const ModelConfig&) { return std::make_shared<TanhNorm>(dim); });
    register_feed_forward(kTanhFeedForward, "tanh(x W^T + b)",
                          [](const ModelConfig& c, Generator& gen) {
                            return std::make_shared<TanhFeedForward>(c.d_model, gen);
                          });
    return true;
  }();
  (void)registered;
}

// V 7, T 6, C 12, H 3, F 20: every size different.
ModelConfig small(const std::string& norm, const std::string& feed_forward = kMlp) {
  return {.vocab_size = 7,
          .max_len = 6,
          .d_model = 12,
          .num_layers = 1,
          .attention = {.num_heads = 3},
          .norm = {.kind = norm},
          .feed_forward = {.kind = feed_forward, .d_ff = 20}};
}

std::vector<std::string> parameter_names(const Module& model) {
  std::vector<std::string> names;
  for (const auto& [name, parameter] : model.named_parameters()) names.push_back(name);
  return names;
}

bool has_check(const std::string& name) {
  const std::vector<ModuleCheck>& checks = module_checks();
  return std::any_of(checks.begin(), checks.end(),
                     [&](const ModuleCheck& c) { return c.name == name; });
}

TEST(ModuleRegistry, RmsNormMatchesAHandComputation) {
  RMSNorm norm(5);
  Generator gen(4);
  Tensor(norm.weight).copy_from(Tensor::randn({5}, gen));
  const Tensor x = Tensor::randn({2, 3, 5}, gen, DType::Float64);  // [B, T, C]
  norm.to(DType::Float64);
  const std::vector<double> in = x.to_vector(), weight = norm.weight.to_vector();
  const std::vector<double> out = norm.forward(x).to_vector();
  ASSERT_EQ(out.size(), in.size());
  for (size_t row = 0; row < 6; ++row) {
    double square = 0;
    for (size_t c = 0; c < 5; ++c) square += in[row * 5 + c] * in[row * 5 + c];
    const double scale = 1 / std::sqrt(square / 5 + 1e-5);
    for (size_t c = 0; c < 5; ++c) {
      EXPECT_NEAR(out[row * 5 + c], in[row * 5 + c] * scale * weight[c], 1e-12) << row << " " << c;
    }
  }
  EXPECT_EQ(parameter_names(norm), std::vector<std::string>{"weight"});
}

TEST(ModuleRegistry, RmsNormIsABuiltInRowWithItsGradientCheck) {
  ASSERT_TRUE(has_check("norm rmsnorm"));
  for (const ModuleCheck& check : module_checks()) {
    if (check.name != "norm rmsnorm") continue;
    const GradcheckReport report = check.run(0);
    EXPECT_TRUE(report.passed()) << describe(report);
    EXPECT_EQ(report.inputs.size(), 2u);  // the input and the weight
  }
  DecoderLM model(small(kRmsNorm));
  EXPECT_NE(std::dynamic_pointer_cast<RMSNorm>(model.blocks[0]->ln1), nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<RMSNorm>(model.ln_f), nullptr);
}

TEST(ModuleRegistry, BothModelsBuildARegisteredNormByNameWithItsHookPoint) {
  register_test_modules();
  DecoderLM decoder(small(kTanhNorm));
  const std::vector<std::string> names = parameter_names(decoder);
  for (const char* want : {"blocks.0.ln1.gain", "blocks.0.ln2.gain", "ln_f.gain"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  EncoderDecoder seq2seq(small(kTanhNorm));
  const std::vector<std::string> seq2seq_names = parameter_names(seq2seq);
  for (const char* want : {"encoder.0.ln1.gain", "decoder.0.ln_cross.gain", "encoder_ln.gain"}) {
    EXPECT_NE(std::find(seq2seq_names.begin(), seq2seq_names.end(), want), seq2seq_names.end())
        << want;
  }
  // The head reads ln_f's output: tanh(residual) * gain, the norm's hook point.
  NoGradGuard no_grad;
  const Indices samples({1, 6}, {1, 2, 0, 3, 4, 5});
  const SequenceBatch batch = decoder.make_batch(samples, 2);
  const ActivationCache cache = run_with_cache(decoder, batch, "*");
  const Tensor residual = cache.at("blocks.0.hook_resid_post");
  const auto& ln_f = dynamic_cast<const TanhNorm&>(*decoder.ln_f);
  EXPECT_EQ(cache.at("ln_f.hook_normalized").to_vector(), (tanh(residual) * ln_f.gain).to_vector());
}

TEST(ModuleRegistry, ARegisteredFeedForwardIsBuiltByNameAndChecked) {
  register_test_modules();
  DecoderLM model(small(kLayerNorm, kTanhFeedForward));
  const auto ffn = std::dynamic_pointer_cast<TanhFeedForward>(model.blocks[0]->ffn);
  ASSERT_NE(ffn, nullptr);
  {
    NoGradGuard no_grad;
    Generator gen(3);
    const Tensor x = Tensor::randn({2, 5, 12}, gen);  // [B, T, C]
    EXPECT_EQ(ffn->forward(x).to_vector(), tanh(ffn->proj->forward(x)).to_vector());
  }
  for (const std::string& name :
       {std::string("norm ") + kTanhNorm, std::string("feed-forward ") + kTanhFeedForward}) {
    ASSERT_TRUE(has_check(name)) << name;
    for (const ModuleCheck& check : module_checks()) {
      if (check.name == name) {
        EXPECT_TRUE(check.run(1).passed()) << name;
      }
    }
  }
}

TEST(ModuleRegistry, RefusesATakenOrEmptyNameAndNamesTheMissingOne) {
  register_test_modules();
  const auto message = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const auto tanh_norm = [](int64_t dim, const ModelConfig&) {
    return std::make_shared<TanhNorm>(dim);
  };
  EXPECT_EQ(message([&] { register_norm(kLayerNorm, "again", tanh_norm); }),
            "gradlab::nn::register_norm: a norm named 'layer' is registered already");
  EXPECT_EQ(message([&] { register_norm("", "nameless", tanh_norm); }),
            "gradlab::nn::register_norm: the norm's name is empty");
  EXPECT_EQ(message([&] { register_feed_forward("nothing", "no factory", nullptr); }),
            "gradlab::nn::register_feed_forward: 'nothing' has no factory");
  const std::string missing = message([] { DecoderLM model(small(kLayerNorm, "swiglu")); });
  EXPECT_NE(missing.find("feed-forward 'swiglu' is not registered in this program"),
            std::string::npos)
      << missing;
  EXPECT_NE(missing.find("gradlab::nn::register_feed_forward(\"swiglu\""), std::string::npos)
      << missing;
}

TEST(ModuleRegistry, WithoutTheFinalNormTheHeadReadsTheResidualStream) {
  ModelConfig config = small(kLayerNorm);
  config.norm.final = false;
  DecoderLM decoder(config);
  EXPECT_EQ(decoder.ln_f, nullptr);
  EXPECT_NE(decoder.blocks[0]->ln1, nullptr);
  EncoderDecoder seq2seq(config);
  EXPECT_EQ(seq2seq.encoder_ln, nullptr);
  EXPECT_EQ(seq2seq.ln_f, nullptr);
  NoGradGuard no_grad;
  Generator gen(9);
  const Tensor residual = Tensor::randn({1, 4, 12}, gen);  // [B, T, C]
  EXPECT_EQ(decoder.unembed(residual).to_vector(), decoder.head->forward(residual).to_vector());
  // Two fewer norms of C weights and C biases than with it, one fewer in the decoder.
  EXPECT_EQ(DecoderLM(small(kLayerNorm)).num_parameters() - decoder.num_parameters(), 2 * 12);
  EXPECT_EQ(EncoderDecoder(small(kLayerNorm)).num_parameters() - seq2seq.num_parameters(),
            2 * 2 * 12);
  EXPECT_EQ(model_footprint("decoder", config).parameters,
            static_cast<double>(decoder.num_parameters()));
  EXPECT_EQ(model_footprint("seq2seq", config).parameters,
            static_cast<double>(seq2seq.num_parameters()));
}

// A program's checkpoint records the norm's name; it loads back where the norm is registered,
// and where it is not, the error names the norm and how to register it.
TEST(ModuleRegistry, ACheckpointNamesItsNormAndLoadingWithoutItSaysWhatToRegister) {
  register_test_modules();
  TempDir dir;
  const std::string path = dir.file("tanh.h5");
  ModelConfig config = gradlab::testing::small_net("decoder");
  config.norm.kind = kTanhNorm;
  const auto model = make_sequence_model("decoder", config);
  gradlab::testing::train_and_save(model, path);
  const train::LoadedModel loaded = train::load_model(path);
  EXPECT_EQ(loaded.config.net.norm.kind, kTanhNorm);
  EXPECT_EQ(loaded.model->named_parameters()[2].first, "blocks.0.ln1.gain");
  for (const auto& [name, parameter] : model->named_parameters()) {
    EXPECT_EQ(loaded.model->parameter(name).to_vector(), parameter.to_vector()) << name;
  }

  train::CheckpointData data = train::read_checkpoint(path);
  for (auto& [key, value] : data.config) {
    if (key == "norm") value = std::string("not_in_this_program");
  }
  const std::string renamed = dir.file("renamed.h5");
  train::save_checkpoint(renamed, data);
  try {
    train::load_model(renamed);
    FAIL() << "loaded a model whose norm is not registered";
  } catch (const CheckpointError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(renamed), std::string::npos) << what;
    EXPECT_NE(what.find("norm 'not_in_this_program' is not registered in this program"),
              std::string::npos)
        << what;
    EXPECT_NE(what.find("gradlab::nn::register_norm(\"not_in_this_program\""), std::string::npos)
        << what;
  }
}

}  // namespace test_module_registry
}  // namespace gradlab::nn
