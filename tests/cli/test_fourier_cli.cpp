// `gradlab fourier` on a small modular-addition run: one checkpoint's analysis printed and written
// (HDF5 and CSV), a run's curve over its step checkpoints, and the refusals: a checkpoint of
// another task, bad flags, and an existing --out without --overwrite.
#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/cli_runner.h"
#include "tests/h5_reading.h"
#include "tests/test_helpers.h"

namespace gradlab::testing {
namespace test_fourier_cli {

// Two step checkpoints of a 1-layer model on the sums modulo 7.
std::string modular_run(const TempDir& tmp) {
  const std::string run = tmp.file("run");
  const CommandResult r = run_gradlab({"train",   "--out",
                                       run,       "--task",
                                       "modular", "--modulus",
                                       "7",       "--train-fraction",
                                       "0.5",     "--d-model",
                                       "8",       "--heads",
                                       "2",       "--d-ff",
                                       "16",      "--layers",
                                       "1",       "--batch-size",
                                       "0",       "--steps",
                                       "2",       "--eval-every",
                                       "1",       "--save-every",
                                       "1",       "--target-accuracy",
                                       "0"});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  return run;
}

TEST(FourierCli, AnalysesACheckpointAndARunAndRefusesWhatItCannotRead) {
  TempDir tmp;
  const std::string run = modular_run(tmp);
  const std::string checkpoint = run + "/step-000002.h5";
  const std::string h5 = tmp.file("f.h5"), csv = tmp.file("f.csv");

  const CommandResult one = run_gradlab({"fourier", "--checkpoint", checkpoint, "--out", h5});
  ASSERT_EQ(one.exit_code, 0) << one.describe();
  for (const char* part :
       {"modulus 7, 16 neurons", "key frequencies", "clustered:", "restricted", "excluded"}) {
    EXPECT_TRUE(contains(one.out, part)) << part << "\n" << one.out;
  }
  {
    H5::Exception::dontPrint();
    const H5::H5File file(h5, H5F_ACC_RDONLY);
    std::vector<hsize_t> dims;
    read_values<double>(file, "basis", dims);
    EXPECT_EQ(dims, (std::vector<hsize_t>{7, 7}));
    read_values<double>(file, "neuron_shares", dims);
    EXPECT_EQ(dims, (std::vector<hsize_t>{16, 4}));
    read_values<double>(file, "logit_norms", dims);
    EXPECT_EQ(dims, (std::vector<hsize_t>{4, 4}));
    EXPECT_EQ(read_values<int64_t>(file, "cluster_counts", dims).size(), 4u);
  }
  // An existing --out is replaced only with --overwrite; a checkpoint never.
  expect_usage_error(run_gradlab({"fourier", "--checkpoint", checkpoint, "--out", h5}), "fourier",
                     {"already exists", "--overwrite"});
  EXPECT_EQ(
      run_gradlab({"fourier", "--checkpoint", checkpoint, "--out", h5, "--overwrite"}).exit_code,
      0);
  expect_usage_error(
      run_gradlab({"fourier", "--checkpoint", checkpoint, "--out", checkpoint, "--overwrite"}),
      "fourier", {"is a checkpoint"});

  ASSERT_EQ(run_gradlab({"fourier", "--checkpoint", checkpoint, "--out", csv}).exit_code, 0);
  const std::string table = read_text(csv);
  EXPECT_TRUE(table.starts_with("frequency,embedding_norm,key_share,neurons,logit_norm\n0,"))
      << table;

  const CommandResult curve = run_gradlab({"fourier", "--run", run});
  ASSERT_EQ(curve.exit_code, 0) << curve.describe();
  const std::string written = read_text(run + "/fourier.csv");
  EXPECT_TRUE(written.starts_with(
      "step,train_loss,test_loss,restricted_loss,excluded_loss,key_frequencies\n1,"))
      << written;
  EXPECT_TRUE(contains(written, "\n2,")) << written;
  expect_usage_error(run_gradlab({"fourier", "--run", run}), "fourier", {"already exists"});

  expect_usage_error(run_gradlab({"fourier", "--checkpoint", toy_checkpoint(kTiny, "decoder")}),
                     "fourier", {"a model of task copy", "modular addition"});
  const std::vector<std::pair<std::vector<std::string>, Named>> bad = {
      {{"fourier"}, "exactly one of --checkpoint and --run"},
      {{"fourier", "--checkpoint", checkpoint, "--run", run}, "exactly one"},
      {{"fourier", "--checkpoint", checkpoint, "--share", "0"}, {"--share", "(0, 1]"}},
      {{"fourier", "--checkpoint", checkpoint, "--neuron-threshold", "1.5"},
       {"--neuron-threshold"}},
      {{"fourier", "--checkpoint", checkpoint, "--out", tmp.file("f.txt")}, {".h5 or a .csv"}},
      {{"fourier", "--run", checkpoint}, {"--run", "not a directory"}},
      {{"fourier", "--run", tmp.path().string()}, {"no step-*.h5"}},
  };
  for (const auto& [args, named] : bad) {
    SCOPED_TRACE(args.back());
    expect_usage_error(run_gradlab(args), "fourier", named);
  }
}

}  // namespace test_fourier_cli
}  // namespace gradlab::testing
