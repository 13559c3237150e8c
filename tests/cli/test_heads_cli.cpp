// `gradlab heads`: a model with an induction circuit planted by hand (a previous-token head in
// layer 0, an induction head in layer 1) gets the scores it was built for; trained decoder,
// encoder-decoder and text checkpoints get a table and an HDF5 file; and the errors.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "interp/head_scores.h"
#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace gradlab::testing {
namespace test_heads_cli {

namespace fs = std::filesystem;

// Copy task of length 6 with symbols 1..3: the decoder has 13 positions (n = 6), the
// encoder-decoder 6 (n = 3).
const std::vector<std::string> kModel = {"--length",
                                         "6",
                                         "--symbols",
                                         "3",
                                         "--d-model",
                                         "16",
                                         "--heads",
                                         "4",
                                         "--d-ff",
                                         "16",
                                         "--batch-size",
                                         "8",
                                         "--eval-size",
                                         "8",
                                         "--steps",
                                         "20",
                                         "--target-exact-match",
                                         "0"};

// The planted model's sizes: V = 8 symbols + 2 = 10 tokens, 2 x 6 + 1 = 13 positions (n = 6),
// C = 64 and two heads of D = 32.
constexpr int64_t kVocab = 10, kPositions = 13, kWidth = 64, kHeadDim = 32;
const std::vector<std::string> kPlantedSizes = {"--length",
                                                "6",
                                                "--symbols",
                                                "8",
                                                "--d-model",
                                                "64",
                                                "--heads",
                                                "2",
                                                "--layers",
                                                "2",
                                                "--d-ff",
                                                "8",
                                                "--batch-size",
                                                "2",
                                                "--eval-size",
                                                "2",
                                                "--steps",
                                                "1",
                                                "--eval-every",
                                                "1",
                                                "--target-exact-match",
                                                "0"};

// Where the planted model keeps things in its residual stream of C = 64: the token one-hot
// (A), the position one-hot (P) and the previous position's token, written by layer 0 (A').
int64_t token_dim(int64_t token) {
  return token;
}
int64_t position_dim(int64_t position) {
  return kVocab + position;
}
int64_t previous_token_dim(int64_t token) {
  return kVocab + kPositions + token;
}

// The parameter of data named name.
Tensor& parameter(train::CheckpointData& data, const std::string& name) {
  for (auto& [n, tensor] : data.model) {
    if (n == name) return tensor;
  }
  throw std::runtime_error("no parameter " + name);
}

// weight[row, column] = value for a float32 matrix.
void set(train::CheckpointData& data, const std::string& name, int64_t row, int64_t column,
         float value) {
  Tensor& weight = parameter(data, name);
  weight.mutable_data<float>()[row * weight.size(1) + column] = value;
}

// Head 0 of both layers an induction circuit, every other weight zero (head 1's queries and
// keys too, so that it attends uniformly; the feed-forward sublayers' output is zero), the
// LayerNorms' gains 1. Through pre-LN: every position's residual has the same magnitudes (one-hots
// of equal size), so LayerNorm scales all alike and its mean subtraction shifts each query's
// scores by a constant of the query, which the softmax ignores. key_slot_shift moves layer 0's
// keys (1: key j answers query j + 1, the previous-token head), for the test's own check that a
// wrong construction fails.
void plant_induction_circuit(train::CheckpointData& data, int64_t key_slot_shift = 1) {
  for (auto& [name, tensor] : data.model) {
    float* values = tensor.mutable_data<float>();
    const bool gain = name.find("ln") != std::string::npos && name.ends_with(".weight");
    std::fill(values, values + tensor.numel(), gain ? 1.0f : 0.0f);
  }
  for (int64_t t = 0; t < kVocab; ++t)
    set(data, "embed.token_embedding.weight", t, token_dim(t), 1);
  for (int64_t p = 0; p < kPositions; ++p) {
    set(data, "embed.position_embedding.weight", p, position_dim(p), 1);
  }
  // Layer 0, head 0 (rows [0, D) of the projections): query i is position slot i, key j is
  // slot j + 1, so q_i . k_j is large for j = i - 1 alone (about 23 after LayerNorm's 1 / sigma
  // and the 1 / sqrt(D)). The value is the key's token, written into A' (scaled back to about 1).
  const float beta = 2, back = 0.18f;
  for (int64_t p = 0; p < kPositions; ++p) {
    set(data, "blocks.0.attn.q_proj.weight", p, position_dim(p), beta);
    set(data, "blocks.0.attn.k_proj.weight", p + key_slot_shift, position_dim(p), beta);
  }
  for (int64_t t = 0; t < kVocab; ++t) {
    set(data, "blocks.0.attn.v_proj.weight", t, token_dim(t), 1);
    set(data, "blocks.0.attn.out_proj.weight", previous_token_dim(t), t, back);
  }
  // Layer 1, head 0: query i is its token, key j the token before j (from A'), so query i reads
  // the key after the earlier occurrence of its token: i - n + 1 in the second copy. Key 0 has no
  // token before it (layer 0 gave it its own), so a constant query slot pushes it down.
  const float gamma = 2.5f, no_previous = -40;
  for (int64_t t = 0; t < kVocab; ++t) {
    set(data, "blocks.1.attn.q_proj.weight", t, token_dim(t), gamma);
    set(data, "blocks.1.attn.k_proj.weight", t, previous_token_dim(t), gamma);
  }
  parameter(data, "blocks.1.attn.q_proj.bias").mutable_data<float>()[kVocab] = 1;
  set(data, "blocks.1.attn.k_proj.weight", kVocab, position_dim(0), no_previous);
}

class HeadsCliTest : public ::testing::Test {
 protected:
  // The toy models, or "text": a one-layer character model of two sentences (context 16).
  static std::string checkpoint(const std::string& model) {
    if (model != "text") return toy_checkpoint(kModel, model);
    std::string text;
    for (int i = 0; i < 300; ++i) text += (i % 3 ? "the cat sat. " : "a dog ran! ");
    return (shared_run({"train",
                        "--task",
                        "text",
                        "--data",
                        shared_file("cat-dog.txt", text),
                        "--context",
                        "16",
                        "--d-model",
                        "16",
                        "--heads",
                        "2",
                        "--layers",
                        "1",
                        "--d-ff",
                        "16",
                        "--batch-size",
                        "4",
                        "--steps",
                        "4",
                        "--eval-iters",
                        "2",
                        "--eval-every",
                        "2"})
                .dir /
            "best.h5")
        .string();
  }
};

// A score dataset [L, H] as rows.
std::vector<std::vector<double>> read_scores(const H5::H5File& file, const std::string& name) {
  std::vector<hsize_t> dims;
  const std::vector<double> values = read_values<double>(file, name, dims);
  EXPECT_EQ(file.openDataSet(name).getDataType(), H5::PredType::IEEE_F64LE) << name;
  std::vector<std::vector<double>> rows(dims.at(0));
  for (size_t l = 0; l < rows.size(); ++l) {
    rows[l].assign(values.begin() + static_cast<long>(l * dims.at(1)),
                   values.begin() + static_cast<long>((l + 1) * dims.at(1)));
  }
  return rows;
}

std::vector<std::string> read_points(const H5::H5File& file) {
  const H5::DataSet set = file.openDataSet("points");
  const H5::StrType type = set.getStrType();
  hsize_t count = 0;
  set.getSpace().getSimpleExtentDims(&count);
  std::string packed(type.getSize() * count, '\0');
  set.read(packed.data(), type);
  std::vector<std::string> points;
  for (hsize_t i = 0; i < count; ++i) {
    const std::string padded = packed.substr(i * type.getSize(), type.getSize());
    points.push_back(padded.substr(0, padded.find('\0')));
  }
  return points;
}

int64_t int_attribute(const H5::H5File& file, const std::string& name) {
  int64_t value = 0;
  file.openAttribute(name).read(H5::PredType::NATIVE_INT64, &value);
  return value;
}

// A trained run of the planted model's sizes with the circuit written over its parameters.
std::string planted_checkpoint(const TempDir& tmp, int64_t key_slot_shift = 1) {
  const std::string run = tmp.file("planted-run");
  const CommandResult r = run_gradlab(with({"train", "--out", run}, kPlantedSizes));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  train::CheckpointData data = train::read_checkpoint(run + "/best.h5");
  EXPECT_EQ(parameter(data, "blocks.0.attn.q_proj.weight").shape(), (Shape{kWidth, kWidth}));
  EXPECT_EQ(parameter(data, "embed.position_embedding.weight").shape(),
            (Shape{kPositions, kWidth}));
  plant_induction_circuit(data, key_slot_shift);
  const std::string path = tmp.file("planted.h5");
  train::save_checkpoint(path, data);
  return path;
}

TEST(HeadsCliPlanted, PlantedInductionCircuitScoresAsBuilt) {
  TempDir tmp;
  const std::string checkpoint = planted_checkpoint(tmp);
  const std::string out = tmp.file("scores.h5");
  const CommandResult r = run_gradlab({"heads", "--checkpoint", checkpoint, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "n = 6 random tokens repeated twice, 64 sequences, seed 0")) << r.out;
  EXPECT_TRUE(contains(r.out, "induction heads (induction score above 0.4): blocks.1.attn:0 ("))
      << r.out;
  EXPECT_FALSE(contains(r.out, ":1 (")) << r.out;
  EXPECT_TRUE(contains(r.out, "knock them out together: gradlab ablate --checkpoint " + checkpoint +
                                  " --together blocks.1.attn:0\n"))
      << r.out;
  H5::Exception::dontPrint();
  const H5::H5File file(out, H5F_ACC_RDONLY);
  const auto previous = read_scores(file, "previous_token");
  const auto duplicate = read_scores(file, "duplicate_token");
  const auto induction = read_scores(file, "induction");
  ASSERT_EQ(induction.size(), 2u);
  ASSERT_EQ(induction[0].size(), 2u);
  EXPECT_GT(previous[0][0], 0.9);
  EXPECT_GT(induction[1][0], 0.9);
  EXPECT_LT(induction[0][0], 0.1);
  EXPECT_LT(duplicate[1][0], 0.1);
  // Head 1 of each layer attends uniformly: 1 / (i + 1), averaged, well below the threshold.
  for (int l = 0; l < 2; ++l) {
    EXPECT_LT(previous[l][1], 0.25) << l;
    EXPECT_LT(induction[l][1], 0.15) << l;
  }
  EXPECT_EQ(read_points(file),
            (std::vector<std::string>{"blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"}));
  EXPECT_EQ(int_attribute(file, "length"), 6);
  EXPECT_EQ(int_attribute(file, "sequences"), 64);
  EXPECT_EQ(int_attribute(file, "seed"), 0);
  // The file holds what the library computes on the checkpoint's model.
  const train::LoadedModel loaded = train::load_model(checkpoint);
  const auto scores = interp::head_scores(*loaded.model, {});
  EXPECT_DOUBLE_EQ(scores[1].induction[0], induction[1][0]);
  EXPECT_DOUBLE_EQ(scores[0].previous_token[1], previous[0][1]);
}

TEST_F(HeadsCliTest, ScoresEveryAttentionOfDecoderSeq2seqAndTextCheckpoints) {
  TempDir tmp;
  const std::map<std::string, std::vector<std::string>> points = {
      {"decoder", {"blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern"}},
      {"seq2seq",
       {"encoder.0.attn.hook_pattern", "encoder.1.attn.hook_pattern", "decoder.0.attn.hook_pattern",
        "decoder.0.cross_attn.hook_pattern", "decoder.1.attn.hook_pattern",
        "decoder.1.cross_attn.hook_pattern"}},
      {"text", {"blocks.0.attn.hook_pattern"}}};
  const std::map<std::string, int64_t> lengths = {{"decoder", 6}, {"seq2seq", 3}, {"text", 8}};
  for (const auto& [model, names] : points) {
    SCOPED_TRACE(model);
    const std::string out = tmp.file(model + ".h5");
    const CommandResult r = run_gradlab({"heads", "--checkpoint", checkpoint(model), "--sequences",
                                         "8", "--seed", "3", "--out", out});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, "n = " + std::to_string(lengths.at(model)) +
                                    " random tokens repeated twice, 8 sequences, seed 3"))
        << r.out;
    for (const std::string& name : names) EXPECT_TRUE(contains(r.out, name + "\n")) << r.out;
    EXPECT_TRUE(contains(r.out, "  previous token ")) << r.out;
    EXPECT_TRUE(contains(r.out, "induction heads (induction score above 0.4): ")) << r.out;
    H5::Exception::dontPrint();
    const H5::H5File file(out, H5F_ACC_RDONLY);
    EXPECT_EQ(read_points(file), names);
    const int64_t heads = model == "text" ? 2 : 4;
    for (const char* kind : {"previous_token", "duplicate_token", "induction"}) {
      const auto rows = read_scores(file, kind);
      ASSERT_EQ(rows.size(), names.size()) << kind;
      for (const auto& row : rows) {
        ASSERT_EQ(static_cast<int64_t>(row.size()), heads) << kind;
        for (double score : row) EXPECT_TRUE(score >= 0 && score <= 1) << kind << " " << score;
      }
    }
    EXPECT_EQ(int_attribute(file, "length"), lengths.at(model));
    EXPECT_EQ(int_attribute(file, "sequences"), 8);
    EXPECT_EQ(int_attribute(file, "seed"), 3);
  }
  // Without --out the table alone, and the same numbers for the same seed.
  const CommandResult a = run_gradlab({"heads", "--checkpoint", checkpoint("decoder")});
  const CommandResult b = run_gradlab({"heads", "--checkpoint", checkpoint("decoder")});
  ASSERT_EQ(a.exit_code, 0) << a.describe();
  EXPECT_EQ(a.out, b.out);
  EXPECT_FALSE(contains(a.out, "wrote")) << a.out;
}

TEST_F(HeadsCliTest, BadFlagsAndOutputsAreUsageErrors) {
  TempDir tmp;
  const std::string ck = checkpoint("decoder");
  CommandResult r = run_gradlab({"heads", "--checkpoint", ck, "--length", "7"});
  expect_usage_error(r, "heads", {"--length 7", "needs 14 positions", "has 13", "at most 6"});
  r = run_gradlab({"heads", "--checkpoint", checkpoint("seq2seq"), "--length", "4"});
  expect_usage_error(r, "heads", {"--length 4", "has 6", "at most 3"});
  for (const char* length : {"--length=0", "--length=1", "--length=-2"}) {
    r = run_gradlab({"heads", "--checkpoint", ck, length});
    expect_usage_error(r, "heads", {"--length", "at least 2"});
  }
  r = run_gradlab({"heads", "--checkpoint", ck, "--sequences", "0"});
  expect_usage_error(r, "heads", {"--sequences 0", "at least 1"});
  r = run_gradlab({"heads", "--checkpoint", ck, "--seed", "-1"});
  expect_usage_error(r, "heads", "--seed");
  r = run_gradlab({"heads", "--checkpoint", ck, "--lenght", "3"});
  expect_usage_error(r, "heads", "--lenght");
  r = run_gradlab({"heads"});
  expect_usage_error(r, "heads", "--checkpoint");
  r = run_gradlab({"heads", "--checkpoint", ck, "--overwrite"});
  expect_usage_error(r, "heads", {"--overwrite", "--out"});

  const std::string out = tmp.file("scores.h5");
  std::ofstream(out) << "an earlier file";
  r = run_gradlab({"heads", "--checkpoint", ck, "--out", out});
  expect_usage_error(r, "heads", {"already exists", "--overwrite"});
  EXPECT_EQ(read_text(out), "an earlier file");
  r = run_gradlab({"heads", "--checkpoint", ck, "--out", out, "--overwrite"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "wrote the scores of 2 points")) << r.out;
  const std::string before = read_text(checkpoint("seq2seq"));
  for (const std::string& target : {ck, checkpoint("seq2seq")}) {
    r = run_gradlab({"heads", "--checkpoint", ck, "--out", target, "--overwrite"});
    expect_usage_error(r, "heads", target == ck ? "the checkpoint being read" : "is a checkpoint");
  }
  EXPECT_EQ(read_text(checkpoint("seq2seq")), before);

  r = run_gradlab({"heads", "--checkpoint", tmp.file("missing.h5")});
  expect_runtime_failure(r, "heads", "missing.h5");
  r = run_gradlab({"heads", "--help"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  for (const char* flag : {"gradlab heads", "--length", "--sequences", "--seed", "--out"}) {
    EXPECT_TRUE(contains(r.out, flag)) << r.out;
  }
}

}  // namespace test_heads_cli
}  // namespace gradlab::testing
