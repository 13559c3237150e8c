// Weight-based circuits (interp/circuits.h) and `gradlab circuits`: W_QK and W_OV against the
// attention's own projections, every reported quantity against float64 Eigen on formed
// matrices (V, C, H, D and KV all different), a planted K-composition, the encoder-decoder's
// streams, and the command's table, file and errors.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "autograd/error.h"
#include "interp/circuits.h"
#include "nn/models.h"
#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "tests/test_helpers.h"
#include "train/trainer.h"

namespace gradlab::interp {
namespace test_circuits {

using namespace gradlab::nn;
using testing::contains;

constexpr double kTolerance = 1e-10;

// V = 11, C = 20, H = 4, D = 5, KV = 2: a swapped axis or a wrong K/V group shows.
ModelConfig unequal_config() {
  return {.vocab_size = 11,
          .max_len = 7,
          .d_model = 20,
          .num_layers = 2,
          .seed = 3,
          .attention = {.num_heads = 4, .num_kv_heads = 2},
          .feed_forward = {.d_ff = 6}};
}

std::shared_ptr<SequenceModel> float64_model(const std::string& kind, const ModelConfig& config) {
  std::shared_ptr<SequenceModel> model = make_sequence_model(kind, config);
  model->to(DType::Float64);
  return model;
}

Eigen::MatrixXd matrix(const Tensor& t) {
  const std::vector<double> v = t.to_vector();
  Eigen::MatrixXd m(t.size(0), t.size(1));
  for (int64_t i = 0; i < m.rows(); ++i) {
    for (int64_t j = 0; j < m.cols(); ++j) m(i, j) = v[static_cast<size_t>(i * m.cols() + j)];
  }
  return m;
}

Tensor tensor(const Eigen::MatrixXd& m) {
  std::vector<double> v;
  for (int64_t i = 0; i < m.rows(); ++i) {
    for (int64_t j = 0; j < m.cols(); ++j) v.push_back(m(i, j));
  }
  return Tensor::from_vector(v, {m.rows(), m.cols()}, DType::Float64);
}

Eigen::MatrixXd random_matrix(int64_t rows, int64_t cols, Generator& gen) {
  Eigen::MatrixXd m(rows, cols);
  for (Eigen::Index i = 0; i < m.size(); ++i) m.data()[i] = gen.normal();
  return m;
}

void expect_close(const Eigen::MatrixXd& actual, const Eigen::MatrixXd& expected) {
  ASSERT_EQ(actual.rows(), expected.rows());
  ASSERT_EQ(actual.cols(), expected.cols());
  EXPECT_LE((actual - expected).norm(), kTolerance * expected.norm());
}

double frobenius_score(const Eigen::MatrixXd& writer, const Eigen::MatrixXd& reader) {
  return (writer * reader).norm() / (writer.norm() * reader.norm());
}

// Each head's W_QK and W_OV do what the attention's projections do to row vectors: the score of
// query x against key y is q_h . k_g = x W_QK y^T, and the output of head h alone (its slot of
// the concatenation, the others zero, through out_proj) is v_g W_O = x W_OV.
TEST(Circuits, QkAndOvAreWhatTheProjectionsCompute) {
  ModelConfig config = unequal_config();
  config.bias = false;
  const auto model = float64_model("decoder", config);
  const ModelCircuits circuits = model_circuits(*model);
  ASSERT_EQ(circuits.attentions.size(), 2u);
  EXPECT_EQ(circuits.heads, 4);
  EXPECT_EQ(circuits.head_dim, 5);
  const auto* lm = dynamic_cast<const DecoderLM*>(model.get());
  Generator gen(9);
  const Eigen::MatrixXd x = random_matrix(3, 20, gen), y = random_matrix(6, 20, gen);
  for (size_t l = 0; l < 2; ++l) {
    const MultiHeadAttention& attn = *lm->blocks[l]->attn;
    EXPECT_EQ(circuits.attentions[l].name, "blocks." + std::to_string(l) + ".attn");
    const Eigen::MatrixXd q = matrix(attn.q_proj->forward(tensor(x)));  // [3, H*D]
    const Eigen::MatrixXd k = matrix(attn.k_proj->forward(tensor(y)));  // [6, KV*D]
    const Eigen::MatrixXd v = matrix(attn.v_proj->forward(tensor(x)));  // [3, KV*D]
    for (int64_t h = 0; h < 4; ++h) {
      SCOPED_TRACE(std::to_string(l) + ":" + std::to_string(h));
      const int64_t g = h / 2;
      const FactoredMatrix& qk = circuits.attentions[l].qk[static_cast<size_t>(h)];
      const FactoredMatrix& ov = circuits.attentions[l].ov[static_cast<size_t>(h)];
      expect_close(x * qk.AB() * y.transpose(),
                   q.middleCols(h * 5, 5) * k.middleCols(g * 5, 5).transpose());
      Eigen::MatrixXd z = Eigen::MatrixXd::Zero(3, 20);
      z.middleCols(h * 5, 5) = v.middleCols(g * 5, 5);
      expect_close(x * ov.AB(), matrix(attn.out_proj->forward(tensor(z))));
    }
  }
  expect_close(circuits.embedding, matrix(lm->embed->token_embedding->weight));
  expect_close(circuits.unembedding, matrix(lm->head->weight).transpose());
}

TEST(Circuits, TiedEmbeddingsUnembedThroughTheEmbedding) {
  ModelConfig config = unequal_config();
  config.embedding.tie_embeddings = true;
  const ModelCircuits circuits = model_circuits(*float64_model("decoder", config));
  expect_close(circuits.unembedding, circuits.embedding.transpose());
}

// Every number of the report against Eigen on the formed [C, C] and [V, V] matrices.
TEST(Circuits, ReportMatchesFormedMatrices) {
  const auto model = float64_model("decoder", unequal_config());
  const ModelCircuits circuits = model_circuits(*model);
  const CircuitReport report = circuit_report(*model, {.baseline_draws = 4, .seed = 2});
  ASSERT_EQ(report.attentions, (std::vector<std::string>{"blocks.0.attn", "blocks.1.attn"}));
  ASSERT_EQ(report.ov_singular_values.size(), 2u * 4 * 5);
  const Eigen::MatrixXd& E = circuits.embedding;
  const Eigen::MatrixXd& U = circuits.unembedding;
  for (size_t l = 0; l < 2; ++l) {
    for (int64_t h = 0; h < 4; ++h) {
      SCOPED_TRACE(std::to_string(l) + ":" + std::to_string(h));
      const size_t i = l * 4 + static_cast<size_t>(h);
      const Eigen::MatrixXd ov = circuits.attentions[l].ov[static_cast<size_t>(h)].AB();
      const Eigen::MatrixXd qk = circuits.attentions[l].qk[static_cast<size_t>(h)].AB();
      EXPECT_NEAR(report.ov_norm[i], ov.norm(), kTolerance * ov.norm());
      EXPECT_NEAR(report.qk_norm[i], qk.norm(), kTolerance * qk.norm());
      const Eigen::VectorXd ov_s = Eigen::JacobiSVD<Eigen::MatrixXd>(ov).singularValues();
      const Eigen::VectorXd qk_s = Eigen::JacobiSVD<Eigen::MatrixXd>(qk).singularValues();
      for (size_t s = 0; s < 5; ++s) {
        EXPECT_NEAR(report.ov_singular_values[i * 5 + s], ov_s[static_cast<Eigen::Index>(s)],
                    kTolerance * ov_s[0]);
        EXPECT_NEAR(report.qk_singular_values[i * 5 + s], qk_s[static_cast<Eigen::Index>(s)],
                    kTolerance * qk_s[0]);
      }
      // The full circuits, formed.
      const Eigen::MatrixXd full_ov = E * ov * U;  // [V, V]
      expect_close(full_ov_circuit(circuits, l, h).AB(), full_ov);
      expect_close(full_qk_circuit(circuits, l, h).AB(), E * qk * E.transpose());
      const Eigen::VectorXcd eig =
          Eigen::EigenSolver<Eigen::MatrixXd>(full_ov, false).eigenvalues();
      const double copying = eig.sum().real() / eig.cwiseAbs().sum();
      EXPECT_NEAR(report.copying_score[i], copying, 1e-9);
      double top1 = 0, rank_sum = 0;
      for (int64_t t = 0; t < 11; ++t) {
        int64_t above = 0;
        for (int64_t j = 0; j < 11; ++j) above += j != t && full_ov(t, j) >= full_ov(t, t);
        top1 += above == 0;
        rank_sum += static_cast<double>(above + 1);
      }
      EXPECT_DOUBLE_EQ(report.diagonal_top1[i], top1 / 11);
      EXPECT_DOUBLE_EQ(report.diagonal_mean_rank[i], rank_sum / 11);
    }
  }
  // Composition: layer 0 writes, layer 1 reads; same-layer and backward pairs are NaN.
  for (size_t k = 0; k < 3; ++k) {
    const std::vector<double>& scores = report.composition[k];
    ASSERT_EQ(scores.size(), 64u);
    for (int64_t a = 0; a < 8; ++a) {
      for (int64_t b = 0; b < 8; ++b) {
        const double score = scores[static_cast<size_t>(a * 8 + b)];
        if (a / 4 >= b / 4) {
          EXPECT_TRUE(std::isnan(score)) << k << " " << a << " " << b;
          continue;
        }
        const Eigen::MatrixXd writer = circuits.attentions[0].ov[static_cast<size_t>(a)].AB();
        const Eigen::MatrixXd qk = circuits.attentions[1].qk[static_cast<size_t>(b - 4)].AB();
        const Eigen::MatrixXd ov = circuits.attentions[1].ov[static_cast<size_t>(b - 4)].AB();
        const Eigen::MatrixXd reader = k == 0 ? qk : k == 1 ? Eigen::MatrixXd(qk.transpose()) : ov;
        EXPECT_NEAR(score, frobenius_score(writer, reader), 1e-12) << k << " " << a << " " << b;
      }
    }
    EXPECT_DOUBLE_EQ(report.baseline[k], composition_baseline(20, 5, kCompositions[k], 4, 2));
  }
  // Elhage's column-vector forms: W_OV^A is the row form transposed, W_QK^B the same matrix;
  // Q-composition ||W_QK^B^T W_OV^A||, K-composition ||W_QK^B W_OV^A||.
  const Eigen::MatrixXd a = circuits.attentions[0].ov[1].AB(),
                        b = circuits.attentions[1].qk[2].AB();
  const double norms = a.norm() * b.norm();
  EXPECT_NEAR(report.composition[0][1 * 8 + 6], (b.transpose() * a.transpose()).norm() / norms,
              1e-12);
  EXPECT_NEAR(report.composition[1][1 * 8 + 6], (b * a.transpose()).norm() / norms, 1e-12);
}

TEST(Circuits, BaselineIsTheMeanOverSeededRandomPairs) {
  Generator gen(7);
  double sum = 0;
  for (int i = 0; i < 3; ++i) {
    const Eigen::MatrixXd wa = random_matrix(30, 6, gen), wb = random_matrix(6, 30, gen);
    const Eigen::MatrixXd ra = random_matrix(30, 6, gen), rb = random_matrix(6, 30, gen);
    sum += frobenius_score(wa * wb, ra * rb);
  }
  EXPECT_NEAR(composition_baseline(30, 6, Composition::V, 3, 7), sum / 3, 1e-12);
  EXPECT_NE(composition_baseline(30, 6, Composition::V, 3, 7),
            composition_baseline(30, 6, Composition::V, 3, 8));
  try {
    (void)composition_baseline(30, 6, Composition::Q, 0, 7);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "0 draws; at least 1")) << e.what();
  }
}

// weight[row, column] = value, float64.
void set(const SequenceModel& model, const std::string& name, int64_t row, int64_t column,
         double value) {
  Tensor weight = model.parameter(name);
  weight.mutable_data<double>()[row * weight.size(1) + column] = value;
}

void zero_rows(const SequenceModel& model, const std::string& name, int64_t first, int64_t count) {
  Tensor weight = model.parameter(name);
  for (int64_t r = first; r < first + count; ++r) {
    for (int64_t c = 0; c < weight.size(1); ++c) set(model, name, r, c, 0);
  }
}

void zero_columns(const SequenceModel& model, const std::string& name, int64_t first,
                  int64_t count) {
  Tensor weight = model.parameter(name);
  for (int64_t r = 0; r < weight.size(0); ++r) {
    for (int64_t c = first; c < first + count; ++c) set(model, name, r, c, 0);
  }
}

// A 2-layer attention-only model (C = 24, H = 3, D = 8), random weights but for two heads set
// through its named parameters: head 0:1 reads token dimensions {0, 1} with its values and
// writes them into dimensions {20, 21}; head 1:2 reads {20, 21} with its keys and {0, 1} with
// its queries. Head 0:1's output is what head 1:2's keys read: K-composition.
TEST(Circuits, PlantedKCompositionStandsOutFromTheBaseline) {
  const ModelConfig config{.vocab_size = 10,
                           .max_len = 9,
                           .d_model = 24,
                           .num_layers = 2,
                           .seed = 11,
                           .attention = {.num_heads = 3},
                           .norm = {.kind = kNoNorm},
                           .feed_forward = {.d_ff = 0}};
  const auto model = float64_model("decoder", config);
  const int64_t D = 8;
  zero_rows(*model, "blocks.0.attn.v_proj.weight", D, D);
  zero_columns(*model, "blocks.0.attn.out_proj.weight", D, D);
  zero_rows(*model, "blocks.1.attn.k_proj.weight", 2 * D, D);
  zero_rows(*model, "blocks.1.attn.q_proj.weight", 2 * D, D);
  for (int64_t i = 0; i < 2; ++i) {
    set(*model, "blocks.0.attn.v_proj.weight", D + i, i, 1);
    set(*model, "blocks.0.attn.out_proj.weight", 20 + i, D + i, 1);
    set(*model, "blocks.1.attn.k_proj.weight", 2 * D + i, 20 + i, 1);
    set(*model, "blocks.1.attn.q_proj.weight", 2 * D + i, i, 1);
  }
  const CircuitReport report = circuit_report(*model);
  const std::vector<double>& k = report.composition[1];
  const size_t planted = 1 * 6 + 5;                    // writer 0:1, reader 1:2
  EXPECT_NEAR(k[planted], 1 / std::sqrt(2.0), 1e-12);  // rank 2 read exactly
  EXPECT_GT(k[planted], 3 * report.baseline[1]);
  for (size_t kind = 0; kind < 3; ++kind) {
    for (int64_t a = 0; a < 3; ++a) {
      for (int64_t b = 3; b < 6; ++b) {
        const size_t pair = static_cast<size_t>(a * 6 + b);
        if (kind == 1 && pair == planted) continue;
        SCOPED_TRACE(std::to_string(kind) + " " + std::to_string(a) + " " + std::to_string(b));
        EXPECT_LT(report.composition[kind][pair], 0.5 * k[planted]);
        EXPECT_LT(report.composition[kind][pair], 2 * report.baseline[kind]);
        // The planted heads' other compositions: their subspaces miss each other (Q) or the
        // other head's are random.
        if (kind == 0 && pair == planted) {
          EXPECT_LT(report.composition[kind][pair], 1e-12);
        }
      }
    }
  }
}

// The encoder-decoder: encoder heads compose only with the encoder's later heads and with the
// cross-attentions' keys and values; decoder heads never with the encoder.
TEST(Circuits, EncoderDecoderPairsFollowTheStreams) {
  const auto model = float64_model("seq2seq", unequal_config());
  const ModelCircuits circuits = model_circuits(*model);
  std::vector<std::string> names;
  for (const AttentionCircuits& a : circuits.attentions) names.push_back(a.name);
  ASSERT_EQ(names, (std::vector<std::string>{"encoder.0.attn", "encoder.1.attn", "decoder.0.attn",
                                             "decoder.0.cross_attn", "decoder.1.attn",
                                             "decoder.1.cross_attn"}));
  const auto q = Composition::Q, k = Composition::K, v = Composition::V;
  EXPECT_TRUE(composes(circuits, 0, 1, q));
  EXPECT_FALSE(composes(circuits, 1, 2, q));  // encoder -> decoder self-attention
  EXPECT_FALSE(composes(circuits, 1, 3, q));  // cross-attention's queries read the decoder
  EXPECT_TRUE(composes(circuits, 1, 3, k));
  EXPECT_TRUE(composes(circuits, 0, 5, v));
  EXPECT_TRUE(composes(circuits, 2, 3, q));   // decoder self -> cross in the same block
  EXPECT_FALSE(composes(circuits, 2, 3, k));  // cross-attention's keys read the encoder
  EXPECT_TRUE(composes(circuits, 3, 4, v));
  EXPECT_FALSE(composes(circuits, 4, 2, v));
  const CircuitReport report = circuit_report(*model, {.baseline_draws = 2});
  const size_t n = 6 * 4;
  for (size_t kind = 0; kind < 3; ++kind) {
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = 0; b < n; ++b) {
        EXPECT_EQ(std::isnan(report.composition[kind][a * n + b]),
                  !composes(circuits, a / 4, b / 4, kCompositions[kind]));
      }
    }
  }
}

// `gradlab circuits` on a trained checkpoint: the table, the file (what the library computes
// on the checkpoint's model), --layer and --head, and the errors.
class CircuitsCli : public ::testing::Test {
 protected:
  static std::string checkpoint() {
    return testing::toy_checkpoint({"--length",
                                    "3",
                                    "--symbols",
                                    "5",
                                    "--d-model",
                                    "12",
                                    "--heads",
                                    "3",
                                    "--layers",
                                    "2",
                                    "--d-ff",
                                    "8",
                                    "--batch-size",
                                    "4",
                                    "--eval-size",
                                    "4",
                                    "--steps",
                                    "4",
                                    "--target-exact-match",
                                    "0"},
                                   "decoder");
  }
};

TEST_F(CircuitsCli, PrintsTheTableAndWritesTheFile) {
  testing::TempDir tmp;
  const std::string out = tmp.file("circuits.h5"), ck = checkpoint();
  const testing::CommandResult r = testing::run_gradlab(
      {"circuits", "--checkpoint", ck, "--out", out, "--baseline-draws", "3", "--seed", "4"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "2 attentions x 3 heads of D = 4")) << r.out;
  EXPECT_TRUE(contains(r.out, "blocks.1.attn             2 ")) << r.out;
  for (const char* kind : {"Q-composition (random baseline ", "K-composition", "V-composition"}) {
    EXPECT_TRUE(contains(r.out, kind)) << r.out;
  }
  EXPECT_TRUE(contains(r.out, "blocks.0.attn:0            -> blocks.1.attn:")) << r.out;
  EXPECT_TRUE(contains(r.out, "wrote the circuits of 2 attentions to " + out)) << r.out;

  const train::LoadedModel loaded = train::load_model(ck);
  const CircuitReport report = circuit_report(*loaded.model, {.baseline_draws = 3, .seed = 4});
  H5::Exception::dontPrint();
  const H5::H5File file(out, H5F_ACC_RDONLY);
  std::vector<hsize_t> dims;
  EXPECT_EQ(testing::read_values<double>(file, "ov_singular_values", dims),
            report.ov_singular_values);
  EXPECT_EQ(dims, (std::vector<hsize_t>{2, 3, 4}));
  EXPECT_EQ(testing::read_values<double>(file, "copying_score", dims), report.copying_score);
  EXPECT_EQ(dims, (std::vector<hsize_t>{2, 3}));
  const std::vector<double> k = testing::read_values<double>(file, "composition/k", dims);
  EXPECT_EQ(dims, (std::vector<hsize_t>{6, 6}));
  EXPECT_DOUBLE_EQ(k[1 * 6 + 4], report.composition[1][1 * 6 + 4]);
  EXPECT_TRUE(std::isnan(k[4 * 6 + 1]));
  EXPECT_EQ(testing::read_values<double>(file, "baseline", dims),
            (std::vector<double>{report.baseline.begin(), report.baseline.end()}));

  // The same heads, shown alone.
  const testing::CommandResult one = testing::run_gradlab(
      {"circuits", "--checkpoint", ck, "--layer", "1", "--head", "2", "--top", "1"});
  ASSERT_EQ(one.exit_code, 0) << one.describe();
  EXPECT_TRUE(contains(one.out, "blocks.1.attn             2 ")) << one.out;
  EXPECT_FALSE(contains(one.out, "blocks.0.attn             0 ")) << one.out;
  EXPECT_FALSE(contains(one.out, "blocks.1.attn             1 ")) << one.out;
  EXPECT_TRUE(contains(one.out, "-> blocks.1.attn:2 ")) << one.out;
  EXPECT_FALSE(contains(one.out, "wrote")) << one.out;
}

TEST_F(CircuitsCli, BadFlagsAndOutputsAreUsageErrors) {
  testing::TempDir tmp;
  const std::string ck = checkpoint();
  testing::CommandResult r = testing::run_gradlab({"circuits", "--checkpoint", ck, "--layer", "2"});
  testing::expect_usage_error(r, "circuits", {"--layer 2", "has 2 attentions (0 to 1)"});
  r = testing::run_gradlab({"circuits", "--checkpoint", ck, "--head", "3"});
  testing::expect_usage_error(r, "circuits", {"--head 3", "has 3 heads (0 to 2)"});
  r = testing::run_gradlab({"circuits", "--checkpoint", ck, "--layer", "-1"});
  testing::expect_usage_error(r, "circuits", {"--layer -1", "at least 0"});
  r = testing::run_gradlab({"circuits", "--checkpoint", ck, "--baseline-draws", "0"});
  testing::expect_usage_error(r, "circuits", {"--baseline-draws 0", "at least 1"});
  r = testing::run_gradlab({"circuits", "--checkpoint", ck, "--overwrite"});
  testing::expect_usage_error(r, "circuits", "--overwrite");
  // An existing file is replaced only with --overwrite.
  const std::string out = tmp.file("taken.h5");
  { std::ofstream(out) << "mine"; }
  r = testing::run_gradlab({"circuits", "--checkpoint", ck, "--out", out});
  testing::expect_usage_error(r, "circuits", out);
  EXPECT_EQ(testing::read_text(out), "mine");
  r = testing::run_gradlab({"circuits", "--checkpoint", ck, "--out", out, "--overwrite"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(testing::read_text(out), "mine");
}

}  // namespace test_circuits
}  // namespace gradlab::interp
