// Data-parallel training under mpirun (GRADLAB_MPI builds; process_group.h): 1, 2 and 3
// processes train the model one process trains, a run resumes on another number of processes,
// and a process that dies, fails or differs stops the whole job with a message naming it while
// the checkpoints stay whole.
//
// Tolerance: the losses, metrics and parameters of N processes equal one process's to 1e-5
// relative, but not bit for bit: each process sums its share of the batch's rows and the shares
// are then added, a different order of the same float32 additions (they agree to a few ulps).
// One tensor is left out of the parameter comparison: the key projection's bias, whose true
// gradient is zero (adding q.b to every score of a softmax row changes nothing), so Adam turns
// rounding noise of size 1e-9 into steps of size lr in either run; it is checked to stay noise.
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/cpu.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/io/run_directory.h"

namespace gradlab::train {
namespace test_mpi {

using testing::with;

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::read_text;
using testing::run_command;
using testing::run_gradlab;
using testing::RunOptions;
using testing::TempDir;

constexpr double kTolerance = 1e-5;

// What every mpirun of these tests needs in a container: permission to run as root, and shared
// memory without the cross-process reads some containers forbid (ptrace rules), unless the
// environment already chose.
void allow_mpirun() {
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
}

// `mpirun -np N gradlab args...`, with a third process allowed on two cores, and no process
// pinned to a core (tests run side by side).
CommandResult run_mpi(int processes, const std::vector<std::string>& args,
                      const RunOptions& options = {}) {
  allow_mpirun();
  std::vector<std::string> command = {
      "-np", std::to_string(processes), "--oversubscribe", "--bind-to", "none", GRADLAB_BINARY};
  command.insert(command.end(), args.begin(), args.end());
  return run_command(GRADLAB_MPIRUN, command, options);
}

// One mpirun job whose two processes get different command lines, working directories,
// programs or environment variables (MPI's MPMD form), to make them disagree on purpose.
CommandResult run_mpi_apart(const std::vector<std::string>& rank0,
                            const std::vector<std::string>& rank1,
                            const std::string& directory0 = ".",
                            const std::string& directory1 = ".",
                            const std::string& binary1 = GRADLAB_BINARY,
                            const std::string& rank1_variable = "",
                            const RunOptions& options = {}) {
  allow_mpirun();
  std::vector<std::string> command = {"--bind-to", "none",     "-np",         "1",
                                      "-wdir",     directory0, GRADLAB_BINARY};
  command.insert(command.end(), rank0.begin(), rank0.end());
  command.insert(command.end(), {":", "-np", "1", "-wdir", directory1});
  if (!rank1_variable.empty()) command.insert(command.end(), {"-x", rank1_variable});
  command.push_back(binary1);
  command.insert(command.end(), rank1.begin(), rank1.end());
  return run_command(GRADLAB_MPIRUN, command, options);
}

// A small copy-task model.
const std::vector<std::string> kToy = {
    "train", "--length",    "4",  "--symbols",         "5", "--d-model",
    "16",    "--heads",     "2",  "--layers",          "1", "--d-ff",
    "32",    "--eval-size", "20", "--target-accuracy", "0"};
// 20 steps of batch 8, evaluated after every step. The batch splits 4 + 4 on two processes and
// 2 + 3 + 3 on three.
const std::vector<std::string> kToy20 =
    with(kToy, {"--batch-size", "8", "--eval-every", "1", "--steps", "20"});

// A small character model of a text every Debian system has.
const std::vector<std::string> kText = {"train",
                                        "--task",
                                        "text",
                                        "--data",
                                        "/usr/share/common-licenses/GPL-3",
                                        "--context",
                                        "32",
                                        "--d-model",
                                        "32",
                                        "--heads",
                                        "4",
                                        "--layers",
                                        "2",
                                        "--d-ff",
                                        "64",
                                        "--batch-size",
                                        "6",
                                        "--eval-iters",
                                        "20",
                                        "--eval-every",
                                        "2",
                                        "--steps",
                                        "24"};

// metrics.csv as step -> its deterministic columns (train_loss, eval_loss, token_accuracy,
// exact_match, grad_norm, lr, and after the timings, bits per token).
std::map<int64_t, std::vector<double>> metrics(const fs::path& dir) {
  std::map<int64_t, std::vector<double>> rows;
  std::istringstream in(read_text(dir / "metrics.csv"));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    std::vector<double> fields;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, ',')) fields.push_back(std::stod(cell));
    if (fields.size() != 10) continue;
    rows[static_cast<int64_t>(fields[0])] = {fields[1], fields[2], fields[3], fields[4],
                                             fields[5], fields[6], fields[9]};
  }
  return rows;
}

bool close(double a, double b) {
  return std::abs(a - b) <= kTolerance * std::max(std::abs(a), std::abs(b));
}

// Every row of `want` is in `got`, equal to kTolerance (`exact`: bit for bit).
void expect_same_metrics(const fs::path& got_dir, const fs::path& want_dir, int64_t from_step,
                         bool exact = false) {
  const auto got = metrics(got_dir), want = metrics(want_dir);
  int compared = 0;
  for (const auto& [step, row] : want) {
    if (step < from_step) continue;
    ASSERT_TRUE(got.count(step)) << got_dir << " has no row for step " << step;
    for (size_t i = 0; i < row.size(); ++i) {
      if (exact) {
        EXPECT_EQ(got.at(step)[i], row[i]) << "step " << step << " column " << i;
      } else {
        EXPECT_TRUE(close(got.at(step)[i], row[i]))
            << got_dir << " step " << step << " column " << i << ": " << got.at(step)[i] << " vs "
            << row[i];
      }
    }
    ++compared;
  }
  EXPECT_GT(compared, 3);
}

// The parameters of two checkpoints agree to kTolerance of each tensor's largest value, the key
// projection biases (see the top of the file) aside, which must stay rounding noise.
void expect_same_parameters(const std::string& got_path, const std::string& want_path,
                            bool exact = false) {
  const CheckpointData got = read_checkpoint(got_path), want = read_checkpoint(want_path);
  ASSERT_EQ(got.model.size(), want.model.size());
  for (size_t i = 0; i < want.model.size(); ++i) {
    const auto& [name, w] = want.model[i];
    const std::vector<double> a = got.model[i].second.to_vector(), b = w.to_vector();
    ASSERT_EQ(a.size(), b.size()) << name;
    double largest = 0, worst = 0;
    for (size_t k = 0; k < b.size(); ++k) {
      largest = std::max(largest, std::abs(b[k]));
      worst = std::max(worst, std::abs(a[k] - b[k]));
    }
    if (exact) {
      EXPECT_EQ(worst, 0) << name;
    } else if (name.find("k_proj.bias") != std::string::npos) {
      EXPECT_LT(largest, 1e-3) << name << " is more than the noise of a zero gradient";
    } else {
      EXPECT_LE(worst, kTolerance * largest) << name;
    }
  }
}

void expect_trained(const CommandResult& r) {
  ASSERT_EQ(r.exit_code, 0) << r.describe();
}

// Trains `run` (ending with step `last`) as one process and under mpirun with each number of
// processes: the same metrics and parameters, and with one process the same bits.
void expect_processes_train_as_one(const std::vector<std::string>& run, const std::string& last,
                                   const std::vector<int>& counts) {
  TempDir dir;
  const std::string alone = dir.file("alone");
  expect_trained(run_gradlab(with(run, {"--out", alone})));
  for (int processes : counts) {
    SCOPED_TRACE(std::to_string(processes) + " processes");
    const std::string out = dir.file("np" + std::to_string(processes));
    const CommandResult r = run_mpi(processes, with(run, {"--out", out, "--check-replicas", "1"}));
    expect_trained(r);
    expect_same_metrics(out, alone, 1, processes == 1);
    expect_same_parameters(out + "/" + last, alone + "/" + last, processes == 1);
    // Only rank 0 speaks: one summary line, not one per process.
    EXPECT_EQ(r.out.find("Trained "), r.out.rfind("Trained ")) << r.out;
  }
}

TEST(Mpi, ToyTasksOnOneTwoAndThreeProcessesTrainAsOneProcess) {
  expect_processes_train_as_one(kToy20, "step-000020.h5", {1, 2, 3});
  // The encoder-decoder model, whose batches have source rows too.
  expect_processes_train_as_one(with(kToy, {"--batch-size", "8", "--eval-every", "1", "--steps",
                                            "12", "--task", "sort", "--model", "seq2seq"}),
                                "step-000012.h5", {2, 3});
}

TEST(Mpi, TextTaskOnOneTwoAndThreeProcessesTrainsAsOneProcess) {
  expect_processes_train_as_one(kText, "step-000024.h5", {1, 2, 3});
}

TEST(Mpi, DropoutStreamsAreDeterministicAndReplicasStayEqual) {
  TempDir dir;
  const auto args = with(kToy20, {"--dropout", "0.2", "--check-replicas", "1"});
  expect_trained(run_mpi(2, with(args, {"--out", dir.file("a")})));
  expect_trained(run_mpi(2, with(args, {"--out", dir.file("b")})));
  expect_same_metrics(dir.file("a"), dir.file("b"), 1, true);
  expect_same_parameters(dir.file("a") + "/step-000020.h5", dir.file("b") + "/step-000020.h5",
                         true);
}

// Saved by two processes at step 10, resumed by one and by three: both continue as a run of
// one process does from step 10 (the uninterrupted one-process run, within the tolerance).
TEST(Mpi, ARunResumesOnAnotherNumberOfProcesses) {
  TempDir dir;
  const std::string first = dir.file("first"), straight = dir.file("straight");
  expect_trained(run_mpi(
      2, with(kToy, {"--batch-size", "8", "--eval-every", "1", "--steps", "10", "--out", first})));
  expect_trained(run_gradlab(with(kToy20, {"--out", straight})));
  const std::string saved = first + "/step-000010.h5";
  expect_trained(
      run_gradlab({"train", "--resume", saved, "--steps", "20", "--out", dir.file("one")}));
  expect_trained(run_mpi(3, {"train", "--resume", saved, "--steps", "20", "--out",
                             dir.file("three"), "--check-replicas", "1"}));
  for (const std::string name : {"one", "three"}) {
    SCOPED_TRACE(name);
    expect_same_metrics(dir.file(name), straight, 11);
    expect_same_parameters(dir.file(name) + "/step-000020.h5", straight + "/step-000020.h5");
  }
}

// The gradlab process of rank `rank` among the children of mpirun `launcher` (0: not found).
pid_t rank_process(pid_t launcher, int rank) {
  const std::string wanted = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const size_t paren = line.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(line.substr(paren + 2));
    std::string state;
    pid_t parent = 0;
    rest >> state >> parent;
    if (parent != launcher) continue;
    std::string environ_text = read_text(entry.path() / "environ");
    std::replace(environ_text.begin(), environ_text.end(), '\0', '\n');
    if (contains("\n" + environ_text, "\n" + wanted + "\n")) return std::stoi(pid);
  }
  return 0;
}

// The files of a run directory that are neither checkpoints nor the run's own text files: the
// temporary files of unfinished saves.
std::vector<std::string> temporary_files(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (contains(entry.path().filename().string(), ".tmp-")) found.push_back(entry.path());
  }
  return found;
}

// Saves every 2 steps for a long time; the job must end because of the fault, in seconds.
const std::vector<std::string> kLongSaving =
    with(kToy, {"--steps", "1000000", "--save-every", "2", "--keep", "2", "--eval-every", "2"});

void expect_last_checkpoint_whole(const fs::path& dir) {
  EXPECT_TRUE(temporary_files(dir).empty());
  const std::vector<std::string> checkpoints = step_checkpoints(dir.string());
  ASSERT_FALSE(checkpoints.empty());
  const CommandResult eval = run_gradlab({"eval", "--checkpoint", checkpoints.back()});
  EXPECT_EQ(eval.exit_code, 0) << eval.describe();
}

TEST(Mpi, AKilledProcessStopsTheJobAndTheCheckpointsStayWhole) {
  TempDir dir;
  const std::string out = dir.file("run");
  RunOptions options;
  options.timeout_ms = 60000;
  options.signal = SIGKILL;
  options.signal_after_output = "step 10/";
  options.signal_target = [](pid_t launcher) { return rank_process(launcher, 1); };
  const auto start = std::chrono::steady_clock::now();
  const CommandResult r = run_mpi(2, with(kLongSaving, {"--out", out}), options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(r.signal_sent) << r.describe();
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_TRUE(contains(r.err, "rank 1") && contains(r.err, "signal 9")) << r.describe();
  EXPECT_LT(seconds, 30);
  expect_last_checkpoint_whole(out);
}

// Rank 0 cannot write its checkpoint (the run directory was removed under it): it says so,
// naming itself, and the job ends instead of leaving rank 1 waiting.
TEST(Mpi, AnErrorOnOneProcessStopsTheJob) {
  TempDir dir;
  const std::string out = dir.file("run");
  RunOptions options;
  options.timeout_ms = 60000;
  options.signal = SIGCONT;  // harmless: only the moment matters
  options.signal_after_output = "step 6/";
  options.signal_target = [&out](pid_t launcher) {
    fs::rename(out, out + ".moved");
    return launcher;
  };
  const CommandResult r = run_mpi(2, with(kLongSaving, {"--out", out}), options);
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "gradlab train (rank 0 of 2): ")) << r.describe();
}

// Plain SGD without clipping at a learning rate that warms up to 10 blows up at step 4, after
// three good checkpoints (the loss is the whole batch's on every process, so all see it).
TEST(Mpi, ADivergingRunStopsEveryProcessAndKeepsItsLastGoodCheckpoint) {
  TempDir dir;
  const std::string out = dir.file("run");
  const CommandResult r =
      run_mpi(2, with(kToy20, {"--out", out, "--optimizer", "sgd", "--clip", "0", "--lr", "10",
                               "--warmup", "10", "--save-every", "1"}));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "gradlab train: stopped: ")) << r.describe();
  EXPECT_EQ(r.err.find("stopped: "), r.err.rfind("stopped: ")) << "said once, by rank 0";
  expect_last_checkpoint_whole(out);
}

// SIGUSR1, which mpirun passes on to every process, stops the job cleanly with status 0;
// SIGTERM also saves, but mpirun itself then ends with status 1.
TEST(Mpi, SignalsSaveACheckpointThatResumes) {
  for (const int signal : {SIGUSR1, SIGTERM}) {
    SCOPED_TRACE(strsignal(signal));
    TempDir dir;
    const std::string out = dir.file("run");
    RunOptions options;
    options.signal = signal;
    options.signal_after_output = "step 4/";
    const CommandResult r = run_mpi(2, with(kToy, {"--out", out, "--steps", "1000000"}), options);
    ASSERT_TRUE(r.signal_sent) << r.describe();
    EXPECT_EQ(r.exit_code, signal == SIGUSR1 ? 0 : 1) << r.describe();
    if (signal == SIGUSR1) {
      EXPECT_TRUE(contains(r.out, "Interrupted after step")) << r.out;
    }
    expect_last_checkpoint_whole(out);
    const std::vector<std::string> saved = step_checkpoints(out);
    ASSERT_FALSE(saved.empty());
    const int64_t step = checkpoint_step(saved.back());
    EXPECT_GE(step, 4);
    const CommandResult resumed =
        run_mpi(2, {"train", "--resume", out, "--steps", std::to_string(step + 3)});
    EXPECT_EQ(resumed.exit_code, 0) << resumed.describe();
  }
}

TEST(Mpi, ProcessesThatDisagreeAreRefusedAtTheStart) {
  TempDir dir;
  const auto run = with(kToy20, {"--out", dir.file("run")});
  CommandResult r = run_mpi_apart(run, with(run, {"--lr", "0.002"}));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "rank 1 of 2 has a different configuration than rank 0"))
      << r.describe();

  // Another build of gradlab on one "host": the same program with one byte more (ELF files run
  // with trailing bytes).
  const std::string other_binary = dir.file("gradlab-other");
  fs::copy_file(GRADLAB_BINARY, other_binary);
  std::ofstream(other_binary, std::ios::app | std::ios::binary) << '\0';
  fs::permissions(other_binary, fs::perms::owner_exec, fs::perm_options::add);
  r = run_mpi_apart(run, run, ".", ".", other_binary);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "rank 1 of 2 has a different gradlab binary than rank 0"))
      << r.describe();

  // A host with other vector instructions: rank 1's kernels are the SSE2 variant.
  r = run_mpi_apart(run, run, ".", ".", GRADLAB_BINARY, "GRADLAB_ISA=baseline");
  if (processor_isa() != Isa::baseline) {
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_TRUE(contains(r.err, "rank 1 of 2 has a different kernel instruction set"))
        << r.describe();
    EXPECT_TRUE(contains(r.err, "set GRADLAB_ISA to the lowest on every process")) << r.describe();
  }

  // The same --data path names different texts on the two "hosts" (working directories).
  const std::string text = read_text("/usr/share/common-licenses/GPL-3");
  fs::create_directories(dir.file("host0"));
  fs::create_directories(dir.file("host1"));
  std::ofstream(dir.file("host0/text.txt")) << text;
  std::ofstream(dir.file("host1/text.txt")) << text.substr(0, text.size() - 2) << "x\n";
  const std::vector<std::string> model = {
      "train",     "--task", "text",          "--data", "text.txt", "--context", "16",
      "--d-model", "16",     "--heads",       "2",      "--layers", "1",         "--steps",
      "2",         "--out",  dir.file("text")};
  r = run_mpi_apart(model, model, dir.file("host0"), dir.file("host1"));
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "rank 1 of 2 has a different text (--data) than rank 0"))
      << r.describe();

  fs::remove(dir.file("host1/text.txt"));
  r = run_mpi_apart(model, model, dir.file("host0"), dir.file("host1"));
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  // An error of one process alone, in the README's form.
  EXPECT_TRUE(contains(r.err, "gradlab train (rank 1 of 2): ")) << r.describe();
  EXPECT_TRUE(contains(r.err, "text.txt")) << r.describe();
  EXPECT_FALSE(fs::exists(dir.file("text")));
}

// The processes still running whose command line contains `marker`.
std::vector<std::string> processes_naming(const std::string& marker) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string command_line = read_text(entry.path() / "cmdline");
    std::replace(command_line.begin(), command_line.end(), '\0', ' ');
    if (contains(command_line, marker)) found.push_back(pid + ": " + command_line);
  }
  return found;
}

// A job whose processes run different commands, or whose second process is not gradlab at all,
// ends at the start with a message naming the difference or the time-out, and leaves no process
// behind; the test's own time-out keeps a regression from hanging the suite.
TEST(Mpi, AJobWhoseProcessesRunOtherCommandsEndsAtTheStart) {
  TempDir dir;
  const std::vector<std::string> train = with(kToy20, {"--out", dir.file("run")});
  const std::vector<std::string> eval = {"eval", "--checkpoint", dir.file("none.h5")};
  RunOptions bounded;
  bounded.timeout_ms = 60000;
  CommandResult r = run_mpi_apart(train, eval, ".", ".", GRADLAB_BINARY, "", bounded);
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "gradlab train: rank 1 of 2 runs gradlab eval, rank 0 gradlab train"))
      << r.describe();
  EXPECT_TRUE(processes_naming(dir.path().string()).empty());

  r = run_mpi_apart(eval, train, ".", ".", GRADLAB_BINARY, "", bounded);
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "gradlab eval: rank 1 of 2 runs gradlab train, rank 0 gradlab eval"))
      << r.describe();
  EXPECT_TRUE(processes_naming(dir.path().string()).empty());

  // A second process that never joins: gradlab gives up after GRADLAB_START_TIMEOUT seconds, and
  // mpirun then ends the other program too.
  const std::string sleeper = "/bin/sleep";
  const std::string never = "97.25";  // seconds, and the mark of this sleep among processes
  bounded.environment["GRADLAB_START_TIMEOUT"] = "3";
  const auto start = std::chrono::steady_clock::now();
  r = run_mpi_apart(train, {never}, ".", ".", sleeper, "", bounded);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(contains(r.err, "gradlab train: the job's processes did not all start within 3 s"))
      << r.describe();
  EXPECT_LT(seconds, 30);
  EXPECT_TRUE(processes_naming(dir.path().string()).empty());
  EXPECT_TRUE(processes_naming(sleeper + " " + never).empty());
}

TEST(Mpi, ABatchSmallerThanTheGroupAndOtherCommandsAreRefused) {
  TempDir dir;
  CommandResult r = run_mpi(3, with(kToy, {"--out", dir.file("run"), "--batch-size", "2"}));
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(contains(r.err, "--batch-size 2 is smaller than the 3 processes")) << r.describe();

  r = run_mpi(2, {"explain"});
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(contains(r.err, "only train runs on several")) << r.describe();
}

}  // namespace test_mpi
}  // namespace gradlab::train
