// The registries of positional schemes and attention score modifiers (nn/module_registry.h):
// ALiBi against a hand computation and inside attention, the built-in position rows and the older
// learned-positions option, modules registered by the test used by name in both built-in models
// (parameters, gradient checks), the fused path kept without a modifier, generation, and
// checkpoints that name the modules or name ones this program lacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "autograd/op_registry.h"
#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/models.h"
#include "nn/module_checks.h"
#include "nn/module_registry.h"
#include "tests/cli_runner.h"
#include "tests/program_checkpoint.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/trainer.h"

namespace gradlab::nn {
namespace test_positions_and_score_modifiers {

using gradlab::testing::TempDir;

// A positional scheme of the test's own: position t adds t * slope, one learned slope per channel.
class RampPositions : public PositionalScheme {
 public:
  RampPositions(int64_t dim, Generator& gen) {
    slope = register_parameter("slope", Tensor::randn({dim}, gen, DType::Float32, 0.0, 0.1));
  }
  Tensor forward(int64_t length, int64_t first, DType dtype) const override {
    std::vector<double> t;
    for (int64_t i = 0; i < length; ++i) t.push_back(static_cast<double>(first + i));
    return Tensor::from_vector(t, {length, 1}, dtype) * slope;  // [T, 1] * [C] -> [T, C]
  }
  Tensor slope;  // [C]
};

// A score modifier of the test's own: a learned bias per head, the same for every query and key.
class HeadBias : public ScoreModifier {
 public:
  HeadBias(int64_t heads, Generator& gen) {
    bias = register_parameter("bias", Tensor::randn({heads, 1, 1}, gen));
  }
  Tensor forward(const Tensor& scores, int64_t) const override { return scores + bias; }
  Tensor bias;  // [H, 1, 1]
};

constexpr const char* kRamp = "test_ramp";
constexpr const char* kHeadBias = "test_head_bias";

void register_test_modules() {
  static const bool registered = [] {
    register_positions(kRamp, "t * slope", [](const ModelConfig& c, Generator& gen) {
      return std::make_shared<RampPositions>(c.d_model, gen);
    });
    register_score_modifier(kHeadBias, "a learned bias per head",
                            [](const ModelConfig& c, Generator& gen) {
                              return std::make_shared<HeadBias>(c.attention.num_heads, gen);
                            });
    return true;
  }();
  (void)registered;
}

// V 7, T 6, C 12, H 3, F 20: every size different.
ModelConfig small(const std::string& positions, const std::string& modifier) {
  ModelConfig config{.vocab_size = 7,
                     .max_len = 6,
                     .d_model = 12,
                     .num_layers = 2,
                     .attention = {.num_heads = 3},
                     .feed_forward = {.d_ff = 20}};
  config.embedding.positions = positions;
  config.attention.score_modifier = modifier;
  return config;
}

std::vector<std::string> parameter_names(const Module& model) {
  std::vector<std::string> names;
  for (const auto& [name, parameter] : model.named_parameters()) names.push_back(name);
  return names;
}

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

const ModuleCheck* check_named(const std::string& name) {
  for (const ModuleCheck& check : module_checks()) {
    if (check.name == name) return &check;
  }
  return nullptr;
}

const Indices kTokens({2, 5}, {1, 4, 6, 0, 2, 3, 3, 5, 1, 0});  // [B, T]

TEST(ScoreModifiers, AlibiMatchesAHandComputation) {
  const AlibiBias alibi(4);  // m_h = 2^(-8h/4): 1/4, 1/16, 1/64, 1/256
  EXPECT_EQ(alibi.slopes(), (std::vector<double>{0.25, 0.0625, 0.015625, 0.00390625}));
  EXPECT_NEAR(AlibiBias(3).slopes()[0], std::pow(2.0, -8.0 / 3), 1e-15);
  // Queries at positions 1 and 2 (query_first 1) against keys 0, 1, 2: [B, H, Tq, Tk] =
  // [1, 4, 2, 3], scores 0 except one, so that the result is the bias plus that score.
  Tensor scores = Tensor::zeros({1, 4, 2, 3}, DType::Float64);
  scores.mutable_data<double>()[1 * 6 + 1 * 3 + 0] = 5.0;  // head 1, query 1, key 0
  const Tensor out = alibi.forward(scores, 1);
  ASSERT_EQ(out.shape(), (Shape{1, 4, 2, 3}));
  // |i - j|: query 1 -> 1 0 1; query 2 -> 2 1 0.
  const double distance[2][3] = {{1, 0, 1}, {2, 1, 0}};
  const double slopes[4] = {0.25, 0.0625, 0.015625, 0.00390625};
  for (int64_t h = 0; h < 4; ++h) {
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 3; ++j) {
        const double extra = h == 1 && i == 1 && j == 0 ? 5.0 : 0.0;
        EXPECT_EQ(out.at({0, h, i, j}), extra - slopes[h] * distance[i][j]) << h << i << j;
      }
    }
  }
  EXPECT_EQ(out.at({0, 0, 1, 0}), -0.5);  // the farthest key of head 0, written out
  try {
    alibi.forward(Tensor::zeros({1, 3, 2, 2}), 0);
    FAIL() << "took scores of 3 heads";
  } catch (const ShapeError& e) {
    EXPECT_NE(
        std::string(e.what()).find("AlibiBias: scores [1,3,2,2] are not [B, H, Tq, Tk] with H = 4"),
        std::string::npos)
        << e.what();
  }
}

// In attention the bias comes after the 1/sqrt(D) scaling and before the mask: the same as an
// additive mask of the bias on the same weights.
TEST(ScoreModifiers, AlibiInAttentionIsItsBiasAddedToTheScaledScores) {
  const AttentionConfig config{.d_model = 12, .num_heads = 3};
  Generator gen_a(5), gen_b(5);
  MultiHeadAttention with_alibi(config, gen_a, nullptr, std::make_shared<AlibiBias>(3));
  MultiHeadAttention plain(config, gen_b);
  with_alibi.to(DType::Float64);
  plain.to(DType::Float64);
  Generator gen(6);
  const Tensor x = Tensor::randn({2, 5, 12}, gen, DType::Float64);  // [B, T, C]
  AttentionMasks causal;
  causal.causal = true;
  AttentionMasks biased = causal;
  biased.additive_mask = AlibiBias(3).forward(Tensor::zeros({1, 3, 5, 5}, DType::Float64), 0);
  const AttentionOutput got = with_alibi.forward_with_weights(x, x, causal);
  const AttentionOutput want = plain.forward_with_weights(x, x, biased);
  const std::vector<double> a = got.output.to_vector(), b = want.output.to_vector();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << i;
  // Query 4 of head 0 weighs key 0 by exp(-m * 4) relative to key 4 (m = 2^(-8/3)), scores apart.
  AttentionTrace trace;
  with_alibi.forward_with_weights(x, x, causal, &trace);
  EXPECT_NEAR(trace.modified_scores.at({1, 0, 4, 0}) - trace.scaled_scores.at({1, 0, 4, 0}),
              -4 * std::pow(2.0, -8.0 / 3), 1e-12);
}

TEST(ScoreModifiers, NoneKeepsTheFusedKernelAndAModifierTakesTheComposedOps) {
  register_test_modules();
  const DecoderLM plain(small(kLearnedPositions, kNoScoreModifier));
  EXPECT_EQ(plain.blocks[0]->attn->score_modifier, nullptr);
  const std::vector<std::string> plain_ops = ops_in_graph(plain.forward(kTokens));
  EXPECT_TRUE(has(plain_ops, "fused_attention"));
  EXPECT_FALSE(has(plain_ops, "softmax"));
  for (const char* modifier : {kAlibi, kHeadBias}) {
    const DecoderLM model(small(kLearnedPositions, modifier));
    const std::vector<std::string> ops = ops_in_graph(model.forward(kTokens));
    EXPECT_FALSE(has(ops, "fused_attention")) << modifier;
    EXPECT_TRUE(has(ops, "softmax")) << modifier;
  }
}

TEST(ScoreModifiers, EveryBlocksSelfAttentionHasOneAndCrossAttentionNone) {
  register_test_modules();
  const DecoderLM decoder(small(kLearnedPositions, kHeadBias));
  const std::vector<std::string> names = parameter_names(decoder);
  EXPECT_TRUE(has(names, "blocks.0.attn.score_modifier.bias"));
  EXPECT_TRUE(has(names, "blocks.1.attn.score_modifier.bias"));
  const EncoderDecoder seq2seq(small(kLearnedPositions, kAlibi));
  EXPECT_NE(std::dynamic_pointer_cast<AlibiBias>(seq2seq.encoder_blocks[0]->attn->score_modifier),
            nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<AlibiBias>(seq2seq.decoder_blocks[1]->attn->score_modifier),
            nullptr);
  EXPECT_EQ(seq2seq.decoder_blocks[0]->cross_attn->score_modifier, nullptr);
  // The parameter count the memory estimate gives counts the modifiers' too.
  const EncoderDecoder biased(small(kLearnedPositions, kHeadBias));
  EXPECT_EQ(biased.num_parameters() - seq2seq.num_parameters(), 2 * 2 * 3);
  EXPECT_EQ(model_footprint("seq2seq", small(kLearnedPositions, kHeadBias)).parameters,
            static_cast<double>(biased.num_parameters()));
  EXPECT_EQ(model_footprint("decoder", small(kLearnedPositions, kHeadBias)).parameters,
            static_cast<double>(decoder.num_parameters()));
}

// A cached generation puts each new query at its position: the logits of a whole forward pass.
TEST(ScoreModifiers, GenerationWithAlibiGivesTheWholeForwardsLogits) {
  ModelConfig config = small(kNoPositions, kAlibi);
  DecoderLM model(config);
  model.eval();
  NoGradGuard no_grad;
  const Indices tokens({1, 5}, {1, 4, 6, 0, 2});
  const Tensor whole = model.forward(tokens);  // [1, 5, V]
  GenerationCache cache;
  for (int64_t t = 0; t < 5; ++t) {
    const Tensor step = model.forward_incremental(Indices({1, 1}, {tokens.values[t]}), cache);
    for (int64_t v = 0; v < 7; ++v) {
      EXPECT_NEAR(step.at({0, 0, v}), whole.at({0, t, v}), 1e-5) << t << " " << v;
    }
  }
}

TEST(PositionalSchemes, TheOlderOptionMapsToTheRows) {
  EmbeddingOptions e;
  EXPECT_EQ(position_scheme_name(e), kLearnedPositions);
  e.learned_positions = false;
  EXPECT_EQ(position_scheme_name(e), kSinusoidalPositions);
  e.positions = kNoPositions;  // a scheme named on purpose stays
  EXPECT_EQ(position_scheme_name(e), kNoPositions);
  EXPECT_TRUE(resolved_positions(e).learned_positions);  // 0 only for sinusoidal
  e.positions = kSinusoidalPositions;
  e.learned_positions = true;
  const EmbeddingOptions sinusoidal = resolved_positions(e);
  EXPECT_EQ(sinusoidal.positions, kSinusoidalPositions);
  EXPECT_FALSE(sinusoidal.learned_positions);
  EmbeddingOptions old;
  old.learned_positions = false;
  EXPECT_EQ(resolved_positions(old).positions, kSinusoidalPositions);
}

TEST(PositionalSchemes, BuiltInRowsAndTheOlderOptionBuildTheSameModels) {
  const DecoderLM learned(small(kLearnedPositions, kNoScoreModifier));
  const auto table =
      std::dynamic_pointer_cast<LearnedPositionalEmbedding>(learned.embed->positions);
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(learned.parameter("embed.position_embedding.weight").shape(), (Shape{6, 12}));

  ModelConfig old = small(kLearnedPositions, kNoScoreModifier);
  old.embedding.learned_positions = false;
  const DecoderLM by_flag(old);
  const DecoderLM by_name(small(kSinusoidalPositions, kNoScoreModifier));
  EXPECT_NE(std::dynamic_pointer_cast<SinusoidalPositionalEncoding>(by_name.embed->positions),
            nullptr);
  EXPECT_EQ(parameter_names(by_flag), parameter_names(by_name));
  EXPECT_FALSE(has(parameter_names(by_name), "embed.position_embedding.weight"));
  EXPECT_EQ(by_flag.forward(kTokens).to_vector(), by_name.forward(kTokens).to_vector());

  // Without positions the tokens pass alone: no hook_position, and the model cannot tell the
  // order of a sequence's tokens but by the causal mask.
  const DecoderLM none(small(kNoPositions, kNoScoreModifier));
  EXPECT_EQ(none.embed->positions, nullptr);
  const SequenceBatch batch = none.make_batch(Indices({1, 6}, {1, 2, 0, 3, 4, 5}), 2);
  std::vector<std::string> points;
  for (const HookPointInfo& p : hook_points(none, batch)) points.push_back(p.name);
  EXPECT_TRUE(has(points, "embed.hook_token"));
  EXPECT_FALSE(has(points, "embed.hook_position"));
  NoGradGuard no_grad;
  const ActivationCache cache = run_with_cache(none, batch, "*");
  EXPECT_EQ(cache.at("embed.hook_token").to_vector(),
            cache.at("blocks.0.hook_resid_pre").to_vector());
}

TEST(PositionalSchemes, ARegisteredSchemeIsBuiltByNameInBothModels) {
  register_test_modules();
  const DecoderLM decoder(small(kRamp, kNoScoreModifier));
  EXPECT_TRUE(has(parameter_names(decoder), "embed.position_embedding.slope"));
  const EncoderDecoder seq2seq(small(kRamp, kNoScoreModifier));
  EXPECT_TRUE(has(parameter_names(seq2seq), "embed.position_embedding.slope"));
  EXPECT_EQ(model_footprint("decoder", small(kRamp, kNoScoreModifier)).parameters,
            static_cast<double>(decoder.num_parameters()));
  EXPECT_EQ(model_footprint("decoder", small(kSinusoidalPositions, kNoScoreModifier)).parameters,
            static_cast<double>(decoder.num_parameters() - 12));
  // The first block reads token + t * slope, through hook_position.
  NoGradGuard no_grad;
  const SequenceBatch batch = decoder.make_batch(Indices({1, 6}, {1, 2, 0, 3, 4, 5}), 2);
  const ActivationCache cache = run_with_cache(decoder, batch, "*");
  const auto& ramp = dynamic_cast<const RampPositions&>(*decoder.embed->positions);
  EXPECT_EQ(cache.at("embed.hook_position").to_vector(),
            ramp.forward(5, 0, DType::Float32).to_vector());
  EXPECT_EQ(cache.at("blocks.0.hook_resid_pre").to_vector(),
            (cache.at("embed.hook_token") + cache.at("embed.hook_position")).to_vector());
}

TEST(RegisteredModuleChecks, EveryPositionalSchemeAndScoreModifierIsGradientChecked) {
  register_test_modules();
  for (const std::string name :
       {"positions learned", "positions sinusoidal", "positions test_ramp", "score modifier alibi",
        "score modifier test_head_bias", "DecoderLM (ALiBi, no positions)"}) {
    const ModuleCheck* check = check_named(name);
    ASSERT_NE(check, nullptr) << name;
    const GradcheckReport report = check->run(2);
    EXPECT_TRUE(report.passed()) << name << ": " << describe(report);
  }
  // The "none" rows build nothing to check.
  EXPECT_EQ(check_named("positions none"), nullptr);
  EXPECT_EQ(check_named("score modifier none"), nullptr);
  // ALiBi's: the query, the key-value input and the 8 projection parameters.
  EXPECT_EQ(check_named("score modifier alibi")->run(0).inputs.size(), 10u);
  EXPECT_EQ(check_named("score modifier test_head_bias")->run(0).inputs.size(), 11u);
}

TEST(RegisteredModuleChecks, TheRegistriesRefuseATakenNameAndNameAMissingOne) {
  register_test_modules();
  const auto message = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([] {
              register_score_modifier(kAlibi, "again", [](const ModelConfig&, Generator&) {
                return std::shared_ptr<ScoreModifier>();
              });
            }),
            "gradlab::nn::register_score_modifier: a score modifier named 'alibi' is registered "
            "already");
  EXPECT_EQ(message([] { register_positions("", "nameless", nullptr); }),
            "gradlab::nn::register_positions: the positional scheme's name is empty");
  const std::string missing = message([] { DecoderLM model(small("rotary", kNoScoreModifier)); });
  EXPECT_NE(missing.find("positional scheme 'rotary' is not registered in this program"),
            std::string::npos)
      << missing;
  EXPECT_NE(missing.find("gradlab::nn::register_positions(\"rotary\""), std::string::npos)
      << missing;
}

// The run's flags: a name must be registered, and /config records the scheme the run built.
TEST(RegisteredModuleChecks, TheFlagsNameTheRowsAndConfigRecordsTheScheme) {
  train::RunConfig config;
  config.net.attention.score_modifier = "t5";
  try {
    train::check_fields(config);
    FAIL() << "took an unregistered score modifier";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--score-modifier: score modifier 't5' is not registered"),
              std::string::npos)
        << e.what();
  }
  config = train::RunConfig{};
  config.net.embedding.learned_positions = false;  // --learned-positions 0, as older runs say
  train::finalize(config);
  const std::vector<train::ConfigEntry> entries = train::to_entries(config);
  const auto value = [&](const std::string& key) {
    for (const auto& [k, v] : entries) {
      if (k == key) return v;
    }
    return train::ConfigValue(std::string("missing"));
  };
  EXPECT_EQ(value("positions"), train::ConfigValue(std::string(kSinusoidalPositions)));
  EXPECT_EQ(value("learned-positions"), train::ConfigValue(int64_t{0}));
  EXPECT_EQ(value("score-modifier"), train::ConfigValue(std::string(kNoScoreModifier)));
}

// The checkpoint at path with the /config attributes of `set` given those values and the ones
// of `removed` left out, saved as the file `name` in dir.
std::string rewritten(const TempDir& dir, const std::string& path, const std::string& name,
                      const std::vector<std::pair<std::string, train::ConfigValue>>& set,
                      const std::vector<std::string>& removed = {}) {
  train::CheckpointData data = train::read_checkpoint(path);
  std::vector<train::ConfigEntry> kept;
  for (auto& [key, value] : data.config) {
    if (std::find(removed.begin(), removed.end(), key) != removed.end()) continue;
    for (const auto& [k, v] : set) {
      if (key == k) value = v;
    }
    kept.emplace_back(key, value);
  }
  data.config = kept;
  const std::string out = dir.file(name);
  train::save_checkpoint(out, data);
  return out;
}

TEST(RegisteredModuleCheckpoints, RecordTheNamesAndSayWhatToRegister) {
  register_test_modules();
  TempDir dir;
  const std::string path = dir.file("ramp.h5");
  ModelConfig config = gradlab::testing::small_net("decoder");
  config.embedding.positions = kRamp;
  config.attention.score_modifier = kHeadBias;
  const auto model = make_sequence_model("decoder", config);
  gradlab::testing::train_and_save(model, path);
  const train::LoadedModel loaded = train::load_model(path);
  EXPECT_EQ(loaded.config.net.embedding.positions, kRamp);
  EXPECT_EQ(loaded.config.net.attention.score_modifier, kHeadBias);
  for (const auto& [name, parameter] : model->named_parameters()) {
    EXPECT_EQ(loaded.model->parameter(name).to_vector(), parameter.to_vector()) << name;
  }

  for (const auto& [key, name, call] :
       {std::tuple{"positions", "rotary", "gradlab::nn::register_positions"},
        std::tuple{"score-modifier", "t5_bias", "gradlab::nn::register_score_modifier"}}) {
    const std::string renamed = rewritten(dir, path, std::string(key) + ".h5",
                                          {{key, train::ConfigValue(std::string(name))}});
    try {
      train::load_model(renamed);
      FAIL() << "loaded a model whose " << key << " is not registered";
    } catch (const CheckpointError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(renamed), std::string::npos) << what;
      EXPECT_NE(what.find("'" + std::string(name) + "' is not registered in this program"),
                std::string::npos)
          << what;
      EXPECT_NE(what.find(std::string(call) + "(\"" + name + "\""), std::string::npos) << what;
    }
  }
}

// A file written before `positions` and `score-modifier` existed, with learned-positions 0,
// loads as the sinusoidal model it was, with the same logits.
TEST(RegisteredModuleCheckpoints, AnOlderSinusoidalFileLoadsAsBefore) {
  TempDir dir;
  const std::string path = dir.file("sinusoidal.h5");
  ModelConfig config = gradlab::testing::small_net("decoder");
  config.embedding.learned_positions = false;
  const auto model = make_sequence_model("decoder", config);
  gradlab::testing::train_and_save(model, path);
  const std::string older = rewritten(dir, path, "older.h5", {}, {"positions", "score-modifier"});
  ASSERT_EQ(train::read_checkpoint_config(older).size() + 2,
            train::read_checkpoint_config(path).size());
  const train::LoadedModel loaded = train::load_model(older);
  EXPECT_EQ(loaded.config.net.embedding.positions, kSinusoidalPositions);
  EXPECT_EQ(loaded.config.net.attention.score_modifier, kNoScoreModifier);
  NoGradGuard no_grad;
  const Indices tokens({1, 4}, {1, 2, 3, 0});
  EXPECT_EQ(loaded.model->forward(model->make_batch(tokens, 0)).to_vector(),
            model->forward(model->make_batch(tokens, 0)).to_vector());
}

}  // namespace test_positions_and_score_modifiers
}  // namespace gradlab::nn
