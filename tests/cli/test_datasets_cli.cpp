// The instruments over data sets (--data FILE, --held-out N; cli/input_set_option.h): a file of
// N prompts reduces to what N single-prompt runs give, --reduce none keeps their rows bit for
// bit, batching under a tiny --max-memory changes nothing, and bad files are one-line errors
// naming the file and the line.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <fstream>

#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_datasets_cli {

const std::vector<std::string> kPrompts = {"2 1", "3 1", "1 2"};
const char* const kPoint = "blocks.0.hook_resid_post";

std::string decoder() {
  return toy_checkpoint(kTiny, "decoder");
}

std::string write_file(TempDir& tmp, const std::string& name, const std::string& text) {
  const std::string path = tmp.file(name);
  std::ofstream(path) << text;
  return path;
}

std::string prompts_file(TempDir& tmp) {
  std::string text;
  for (const std::string& prompt : kPrompts) text += prompt + "\n";
  return write_file(tmp, "prompts.txt", text);
}

std::vector<float> dataset(const std::string& path, const std::string& name,
                           std::vector<hsize_t>& dims) {
  H5::Exception::dontPrint();
  return read_floats(H5::H5File(path, H5F_ACC_RDONLY), name, dims);
}

// The point's activations of each prompt run alone ([T, C] each).
std::vector<std::vector<float>> single_runs(TempDir& tmp, std::vector<hsize_t>& dims) {
  std::vector<std::vector<float>> runs;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const std::string out = tmp.file("single" + std::to_string(i) + ".h5");
    const CommandResult r = run_gradlab({"activations", "--checkpoint", decoder(), "--input",
                                         kPrompts[i], "--names", kPoint, "--out", out});
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    runs.push_back(dataset(out, kPoint, dims));
  }
  return runs;
}

TEST(DatasetsCli, ActivationsOfAFileAreTheSingleRunsRowsAndTheirMean) {
  TempDir tmp;
  const std::string data = prompts_file(tmp);
  std::vector<hsize_t> one;
  const std::vector<std::vector<float>> runs = single_runs(tmp, one);
  ASSERT_EQ(one.size(), 2u);  // [T, C]
  const auto activations = [&](const std::string& name, std::vector<std::string> flags) {
    const std::string out = tmp.file(name);
    const CommandResult r = run_gradlab(with(
        {"activations", "--checkpoint", decoder(), "--data", data, "--names", kPoint, "--out", out},
        flags));
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    return out;
  };
  std::vector<hsize_t> dims;
  for (const char* memory : {"0", "3e-7"}) {  // one batch; one example a batch
    SCOPED_TRACE(memory);
    const std::vector<float> rows =
        dataset(activations(std::string("none") + memory + ".h5",
                            {"--reduce", "none", "--at", "all", "--max-memory", memory}),
                kPoint, dims);
    ASSERT_EQ(dims, (std::vector<hsize_t>{3, one[0], one[1]}));
    for (size_t i = 0; i < runs.size(); ++i) {
      EXPECT_EQ(std::vector<float>(rows.begin() + i * runs[i].size(),
                                   rows.begin() + (i + 1) * runs[i].size()),
                runs[i]);
    }
  }
  const std::vector<float> mean = dataset(activations("mean.h5", {}), kPoint, dims);
  ASSERT_EQ(dims, one);
  for (size_t e = 0; e < mean.size(); ++e) {
    double sum = 0;
    for (const std::vector<float>& run : runs) sum += run[e];
    EXPECT_EQ(mean[e], static_cast<float>(sum / 3));
  }
  // At the answer: each example's row at its first position with a target (the separator's).
  const std::string at = activations("at.h5", {"--reduce", "none", "--at", "answer"});
  const std::vector<float> rows = dataset(at, kPoint, dims);
  ASSERT_EQ(dims, (std::vector<hsize_t>{3, one[1]}));
  std::vector<hsize_t> token_dims;
  const std::vector<int64_t> targets =
      read_values<int64_t>(H5::H5File(at, H5F_ACC_RDONLY), "targets", token_dims);
  ASSERT_EQ(token_dims, (std::vector<hsize_t>{3, one[0]}));
  for (size_t i = 0; i < runs.size(); ++i) {
    size_t position = 0;
    while (targets[i * one[0] + position] == -100) ++position;
    EXPECT_EQ(std::vector<float>(rows.begin() + i * one[1], rows.begin() + (i + 1) * one[1]),
              std::vector<float>(runs[i].begin() + position * one[1],
                                 runs[i].begin() + (position + 1) * one[1]));
  }
}

// The mean contribution of each part over the runs of `flags` (parsed from the written file).
std::vector<double> dla_mean(TempDir& tmp, const std::string& name,
                             const std::vector<std::string>& flags) {
  const std::string out = tmp.file(name);
  const CommandResult r =
      run_gradlab(with({"dla", "--checkpoint", decoder(), "--out", out}, flags));
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  H5::Exception::dontPrint();
  std::vector<hsize_t> dims;
  return read_values<double>(H5::H5File(out, H5F_ACC_RDONLY), "mean", dims);
}

TEST(DatasetsCli, DlaOfAFileIsTheMeanOfTheSingleRuns) {
  TempDir tmp;
  const std::string data = prompts_file(tmp);
  std::vector<double> expected;
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const std::vector<double> one =
        dla_mean(tmp, "one" + std::to_string(i) + ".h5", {"--input", kPrompts[i]});
    expected.resize(one.size(), 0.0);
    for (size_t n = 0; n < one.size(); ++n) expected[n] += one[n] / 3;
  }
  for (const char* memory : {"0", "1e-12"}) {
    SCOPED_TRACE(memory);
    const std::vector<double> mean = dla_mean(tmp, std::string("set") + memory + ".h5",
                                              {"--data", data, "--max-memory", memory});
    ASSERT_EQ(mean.size(), expected.size());
    for (size_t n = 0; n < mean.size(); ++n) EXPECT_NEAR(mean[n], expected[n], 1e-5);
  }
  const CommandResult r =
      run_gradlab({"dla", "--checkpoint", decoder(), "--data", data, "--top", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "over 3 prompts")) << r.out;
}

TEST(DatasetsCli, LensOfAFileIsTheMeanOfTheSingleRunsAtTheAnswer) {
  TempDir tmp;
  H5::Exception::dontPrint();
  std::vector<hsize_t> dims;
  std::vector<double> expected;  // [L + 1]
  for (size_t i = 0; i < kPrompts.size(); ++i) {
    const std::string out = tmp.file("one" + std::to_string(i) + ".h5");
    const CommandResult r =
        run_gradlab({"lens", "--checkpoint", decoder(), "--input", kPrompts[i], "--out", out});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const H5::H5File file(out, H5F_ACC_RDONLY);
    const std::vector<int64_t> targets = read_values<int64_t>(file, "targets", dims);
    size_t answer = 0;
    while (targets[answer] == -100) ++answer;
    const std::vector<float> p = read_floats(file, "answer_probability", dims);  // [L + 1, T]
    expected.resize(dims[0], 0.0);
    for (size_t l = 0; l < dims[0]; ++l) expected[l] += p[l * dims[1] + answer] / 3;
  }
  const std::string data = prompts_file(tmp);
  for (const char* memory : {"0", "1e-12"}) {
    SCOPED_TRACE(memory);
    const std::string out = tmp.file(std::string("set") + memory + ".h5");
    const CommandResult r = run_gradlab(
        {"lens", "--checkpoint", decoder(), "--data", data, "--max-memory", memory, "--out", out});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, "over 3 prompts of --data")) << r.out;
    const std::vector<float> mean =
        read_floats(H5::H5File(out, H5F_ACC_RDONLY), "answer_probability", dims);
    ASSERT_EQ(dims, (std::vector<hsize_t>{expected.size(), 1}));
    for (size_t l = 0; l < expected.size(); ++l) EXPECT_NEAR(mean[l], expected[l], 1e-6);
  }
  const std::string unequal = write_file(tmp, "unequal.txt", "the cat\nthe\n");
  EXPECT_EQ(run_gradlab({"lens", "--checkpoint", tiny_text_model(), "--data", unequal}).exit_code,
            0);
  expect_usage_error(
      run_gradlab({"lens", "--checkpoint", tiny_text_model(), "--data", unequal, "--at", "all"}),
      "lens", {"line 2", "one length"});
  expect_usage_error(
      run_gradlab({"lens", "--checkpoint", decoder(), "--held-out", "2", "--top", "2"}), "lens",
      "--top shows one prompt's tokens");
}

TEST(DatasetsCli, HeadsScoreAFileOrHeldOutRowsByTheirTokens) {
  TempDir tmp;
  const std::string out = tmp.file("heads.h5");
  CommandResult r = run_gradlab({"heads", "--checkpoint", tiny_text_model(), "--data",
                                 write_file(tmp, "text.txt", "the cat\nthe mat\nsat on\n"), "--out",
                                 out, "--max-memory", "1e-12"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "over 3 prompts of --data")) << r.out;
  EXPECT_TRUE(contains(r.out, "induction heads (induction score above 0.4)")) << r.out;
  std::vector<hsize_t> dims;
  H5::Exception::dontPrint();
  for (const char* kind : {"previous_token", "duplicate_token", "induction"}) {
    for (const double score : read_values<double>(H5::H5File(out, H5F_ACC_RDONLY), kind, dims)) {
      EXPECT_GE(score, 0.0);
      EXPECT_LE(score, 1.0 + 1e-6);
    }
  }
  r = run_gradlab({"heads", "--checkpoint", decoder(), "--held-out", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.out, "over 2 held-out rows")) << r.out;
  expect_usage_error(
      run_gradlab({"heads", "--checkpoint", decoder(), "--held-out", "2", "--sequences", "4"}),
      "heads", "--sequences sizes the random sequences");
  expect_usage_error(
      run_gradlab({"heads", "--checkpoint", toy_checkpoint(kTiny, "seq2seq"), "--held-out", "1"}),
      "heads", "encoder-decoder");
}

// The copy model of tests/cli/test_ablate_patch_cli.cpp (the same shared run): length 4, symbols
// 1..5, trained to answer its prompts exactly.
const std::vector<std::string> kPatchModel = {
    "--length",    "4",  "--symbols", "5",   "--d-model",    "16",
    "--heads",     "2",  "--d-ff",    "16",  "--batch-size", "16",
    "--eval-size", "64", "--steps",   "600", "--eval-every", "50"};

// A patching file's scores by row, and its clean and corrupted logit differences.
struct Patched {
  std::vector<std::string> rows;
  std::vector<double> scores;  // [R] (one site a row)
  double clean = 0, corrupt = 0;
};

Patched patched(const std::string& path) {
  H5::Exception::dontPrint();
  const H5::H5File file(path, H5F_ACC_RDONLY);
  Patched p;
  p.rows = read_strings(file, "rows");
  std::vector<hsize_t> dims;
  p.scores = read_values<double>(file, "scores", dims);
  file.openAttribute("clean_logit_difference").read(H5::PredType::NATIVE_DOUBLE, &p.clean);
  file.openAttribute("corrupt_logit_difference").read(H5::PredType::NATIVE_DOUBLE, &p.corrupt);
  return p;
}

TEST(DatasetsCli, PatchOfPairsScoresTheMeanLogitDifference) {
  TempDir tmp;
  const std::string checkpoint = toy_checkpoint(kPatchModel, "decoder");
  const std::vector<std::pair<std::string, std::string>> pairs = {{"1 2 3 4", "1 2 5 4"},
                                                                  {"3 1 4 2", "3 1 2 2"}};
  const std::vector<std::string> names = {"--names", "hook_logits", "blocks.0.hook_resid_pre",
                                          "embed.hook_position", "blocks.1.attn.hook_z"};
  // Each site's patched logit difference per pair, from the single runs' normalised scores.
  std::vector<double> clean(2), corrupt(2);
  std::vector<std::vector<double>> sites(2);
  std::vector<std::string> rows;
  std::string text;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const std::string out = tmp.file("pair" + std::to_string(i) + ".h5");
    const CommandResult r =
        run_gradlab(with({"patch", "--checkpoint", checkpoint, "--clean", pairs[i].first,
                          "--corrupt", pairs[i].second, "--out", out},
                         names));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const Patched p = patched(out);
    rows = p.rows;
    clean[i] = p.clean;
    corrupt[i] = p.corrupt;
    for (const double score : p.scores)
      sites[i].push_back(p.corrupt + score * (p.clean - p.corrupt));
    text += pairs[i].first + "\t" + pairs[i].second + "\n";
  }
  const std::string data = write_file(tmp, "pairs.txt", text);
  for (const char* memory : {"0", "1e-12"}) {
    SCOPED_TRACE(memory);
    const std::string out = tmp.file(std::string("pairs") + memory + ".h5");
    const CommandResult r = run_gradlab(with(
        {"patch", "--checkpoint", checkpoint, "--data", data, "--max-memory", memory, "--out", out},
        names));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, "2 pairs of --data")) << r.out;
    const Patched p = patched(out);
    ASSERT_EQ(p.rows, rows);
    const double mean_clean = (clean[0] + clean[1]) / 2,
                 mean_corrupt = (corrupt[0] + corrupt[1]) / 2;
    EXPECT_NEAR(p.clean, mean_clean, 1e-4);
    EXPECT_NEAR(p.corrupt, mean_corrupt, 1e-4);
    for (size_t s = 0; s < rows.size(); ++s) {
      const double expected =
          ((sites[0][s] + sites[1][s]) / 2 - mean_corrupt) / (mean_clean - mean_corrupt);
      EXPECT_NEAR(p.scores[s], expected, 1e-5) << rows[s];
    }
  }
  const auto bad = [&](const std::string& name, const std::string& lines) {
    const std::string file = write_file(tmp, name, lines);
    return std::make_pair(file, run_gradlab({"patch", "--checkpoint", checkpoint, "--data", file}));
  };
  auto [file, r] = bad("notab.txt", "1 2 3 4 1 2 5 4\n");
  expect_usage_error(r, "patch", {"--data " + file + " line 1", "no tab"});
  std::tie(file, r) = bad("alike.txt", "1 2 3 4\t1 2 5 4\n1 2 3 4\t1 2 3 4\n");
  expect_usage_error(r, "patch", {"--data " + file + " line 2", "answers both prompts alike"});
  std::tie(file, r) = bad("short.txt", "1 2 3 4\t1 2 5\n");
  expect_usage_error(r, "patch", {"--data " + file + " line 1 (corrupt)"});
  expect_usage_error(
      run_gradlab({"patch", "--checkpoint", checkpoint, "--data", data, "--clean", "1 2 3 4"}),
      "patch", "give --clean and --corrupt, or --data");
}

TEST(DatasetsCli, BadFilesAreOneLineErrorsNamingTheFileAndLine) {
  TempDir tmp;
  const auto activations = [&](const std::string& checkpoint, const std::string& data) {
    return run_gradlab(
        {"activations", "--checkpoint", checkpoint, "--data", data, "--out", tmp.file("never.h5")});
  };
  const std::string missing = tmp.file("missing.txt");
  expect_usage_error(activations(decoder(), missing), "activations",
                     {"--data " + missing, "cannot be read"});
  const std::string empty = write_file(tmp, "empty.txt", "");
  expect_usage_error(activations(decoder(), empty), "activations",
                     {"--data " + empty, "no prompts"});
  const std::string blank = write_file(tmp, "blank.txt", "2 1\n\n");
  expect_usage_error(activations(decoder(), blank), "activations",
                     {"--data " + blank + " line 2", "empty line"});
  const std::string out_of_range = write_file(tmp, "range.txt", "2 1\n2 7\n");
  expect_usage_error(activations(decoder(), out_of_range), "activations",
                     {"--data " + out_of_range + " line 2", "7"});
  const std::string unknown = write_file(tmp, "unknown.txt", "the cat\nthe c@t\n");
  expect_usage_error(activations(tiny_text_model(), unknown), "activations",
                     "--data " + unknown + " line 2");
  const std::string unequal = write_file(tmp, "unequal.txt", "the cat\nthe\n");
  expect_usage_error(activations(tiny_text_model(), unequal), "activations",
                     {"--data " + unequal + " line 2", "3 positions where", "one length"});
  EXPECT_FALSE(std::filesystem::exists(tmp.file("never.h5")));
  // dla reads prompts of unequal lengths at each one's answer.
  EXPECT_EQ(run_gradlab({"dla", "--checkpoint", tiny_text_model(), "--data", unequal}).exit_code,
            0);
  expect_usage_error(run_gradlab({"dla", "--checkpoint", decoder(), "--input", "2 1", "--data",
                                  prompts_file(tmp)}),
                     "dla", "exactly one of --input");
  expect_usage_error(run_gradlab({"activations", "--checkpoint", decoder(), "--input", "2 1",
                                  "--reduce", "none", "--out", tmp.file("never.h5")}),
                     "activations", "--reduce reduces a data set");
  expect_usage_error(run_gradlab({"activations", "--checkpoint", decoder(), "--held-out", "1",
                                  "--at", "first", "--out", tmp.file("never.h5")}),
                     "activations", "--at 'first': answer or all");
}

}  // namespace test_datasets_cli
}  // namespace gradlab::testing
