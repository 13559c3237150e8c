// `gradlab dla` on decoder, encoder-decoder and language-model checkpoints: the parts it writes
// sum to the model's logit (or logit difference), for a prompt and over held-out rows; and the
// refusals of its flags, its outputs and a post-norm model.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_dla_cli {

std::string checkpoint(const std::string& model) {
  return model == "text" ? tiny_text_model() : toy_checkpoint(kTiny, model);
}

std::vector<std::string> prompt_of(const std::string& model) {
  return model == "text" ? std::vector<std::string>{"--prompt", "the cat"}
                         : std::vector<std::string>{"--input", "2 1"};
}

template <class T>
T root_attribute(const H5::H5File& file, const std::string& name, const H5::PredType& type) {
  T value{};
  file.openAttribute(name).read(type, &value);
  return value;
}

// The written parts' sum against the model's logit the file records; the rows it read.
void expect_parts_sum_to_the_logit(const std::string& path, int64_t rows) {
  H5::Exception::dontPrint();
  const H5::H5File file(path, H5F_ACC_RDONLY);
  std::vector<hsize_t> dims;
  const std::vector<double> mean = read_values<double>(file, "mean", dims);
  const std::vector<std::string> labels = read_strings(file, "labels");
  ASSERT_EQ(labels.size(), mean.size());
  EXPECT_EQ(labels.front(), "embed");
  EXPECT_EQ(read_values<double>(file, "std", dims).size(), mean.size());
  const double logit = root_attribute<double>(file, "logit_mean", H5::PredType::NATIVE_DOUBLE);
  EXPECT_NEAR(std::accumulate(mean.begin(), mean.end(), 0.0), logit,
              1e-4 * std::max(1.0, std::abs(logit)));
  EXPECT_EQ(root_attribute<int64_t>(file, "rows", H5::PredType::NATIVE_INT64), rows);
}

TEST(DlaCli, ThePartsSumToTheLogitForAPromptAndOverHeldOutRows) {
  TempDir tmp;
  for (const std::string model : {"decoder", "seq2seq", "text"}) {
    SCOPED_TRACE(model);
    const std::string prompt = tmp.file(model + "-prompt.h5");
    CommandResult r = run_gradlab(
        with({"dla", "--checkpoint", checkpoint(model), "--out", prompt}, prompt_of(model)));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, "direct logit attribution of the logit over 1 prompt: ")) << r.out;
    EXPECT_TRUE(contains(r.out, "L0H1")) << r.out;
    expect_parts_sum_to_the_logit(prompt, 1);
    r = run_gradlab(with({"dla", "--checkpoint", checkpoint(model), "--position", "1", "--answer",
                          "2", "--out", prompt, "--overwrite"},
                         prompt_of(model)));
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    expect_parts_sum_to_the_logit(prompt, 1);
    const std::string heldout = tmp.file(model + "-heldout.h5");
    r = run_gradlab({"dla", "--checkpoint", checkpoint(model), "--held-out", "2", "--versus", "1",
                     "--fold-ln", "--out", heldout});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_TRUE(contains(r.out, "of the logit difference over 2 held-out rows")) << r.out;
    expect_parts_sum_to_the_logit(heldout, 2);
  }
}

TEST(DlaCli, BadFlagsOutputsAndPostNormModelsAreRefused) {
  TempDir tmp;
  const auto dla = [&](std::vector<std::string> args) {
    return run_gradlab(
        with(with({"dla", "--checkpoint", checkpoint("decoder")}, prompt_of("decoder")), args));
  };
  const std::string out = tmp.file("dla.h5");
  ASSERT_EQ(dla({"--out", out}).exit_code, 0);
  expect_usage_error(dla({"--out", out}), "dla", "--overwrite");
  EXPECT_EQ(dla({"--out", out, "--overwrite"}).exit_code, 0);
  expect_usage_error(run_gradlab({"dla", "--checkpoint", checkpoint("decoder")}), "dla",
                     "exactly one of --input");
  expect_usage_error(dla({"--held-out", "2"}), "dla", "exactly one of --input");
  expect_usage_error(run_gradlab({"dla", "--checkpoint", checkpoint("decoder"), "--held-out", "0"}),
                     "dla", "--held-out 0");
  expect_usage_error(run_gradlab({"dla", "--checkpoint", checkpoint("decoder"), "--held-out", "3"}),
                     "dla", {"--held-out 3", "has 2 rows"});
  expect_usage_error(dla({"--position", "x"}), "dla", "--position 'x'");
  expect_usage_error(dla({"--position", "9"}), "dla", "past the last position");
  expect_usage_error(dla({"--answer", "5"}), "dla", "token 5 is not an id in [0, 5)");
  expect_usage_error(dla({"--versus", "-1"}), "dla", "--versus -1");
  std::vector<std::string> post = kTiny;
  post.insert(post.end(), {"--pre-norm", "false"});
  expect_runtime_failure(
      run_gradlab({"dla", "--checkpoint", toy_checkpoint(post, "decoder"), "--input", "2 1"}),
      "dla", "post-norm");
}

}  // namespace test_dla_cli
}  // namespace gradlab::testing
