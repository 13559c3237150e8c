// Checkpoints under bad conditions: saves onto a full or read-only file system, files that are not
// regular, too short to be HDF5, damaged inside a tensor's values, or declaring storage they do
// not hold. Every case must end in one CheckpointError line naming the file, never in a crash, a
// hang or a large allocation, and a failed save must leave the previous file as it was.
//
// The file-system cases mount a small tmpfs, which needs root (as in CI); elsewhere they skip.
#include <H5Cpp.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "tests/cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace test_checkpoint_errors {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::run_gradlab;

// A small checkpoint; the value 1234.5678f occurs once in it, as embed.weight[1, 2].
CheckpointData small() {
  CheckpointData data;
  data.config = {{"task", std::string("copy")}, {"d_model", int64_t{4}}};
  std::vector<float> embed(12);
  for (size_t i = 0; i < embed.size(); ++i) embed[i] = 0.25f * static_cast<float>(i);
  embed[5] = 1234.5678f;
  data.model = {{"embed.weight", Tensor::from_vector(embed, {3, 4})},
                {"scale", Tensor::from_vector(std::vector<float>{2.0f}, {})},
                {"unused", Tensor::zeros({0, 4})}};
  data.optimizer_step = 3;
  data.optimizer_state = {{"embed.weight/momentum_buffer", Tensor::full({3, 4}, 0.5)}};
  data.train.step = 3;
  return data;
}

// small() with a 256 KiB tensor more: too large for the file systems below.
CheckpointData large() {
  CheckpointData data = small();
  data.train.step = 4;
  data.model.emplace_back("big", Tensor::full({256, 256}, 0.125));
  data.optimizer_state.emplace_back("big/momentum_buffer", Tensor::full({256, 256}, 0.0));
  return data;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// What became of f() run in a child process: "ok", "error: <CheckpointError message>", or a
// description of a crash, another exception or a hang. A save that crashes inside HDF5 or a read
// that blocks on a FIFO then fails its test instead of ending the test program.
std::string in_child(const std::function<void()>& f, int timeout_ms = 20000) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string result = "ok";
    try {
      f();
    } catch (const CheckpointError& e) {
      result = std::string("error: ") + e.what();
    } catch (const std::exception& e) {
      result = std::string("other exception: ") + e.what();
    }
    // Shutting HDF5 down closes whatever the call left open: a crash there counts too.
    H5close();
    const ssize_t written = ::write(fds[1], result.data(), result.size());
    ::_exit(written == static_cast<ssize_t>(result.size()) ? 0 : 3);
  }
  ::close(fds[1]);
  std::string out;
  pollfd poll_fd{fds[0], POLLIN, 0};
  bool timed_out = false;
  for (char buffer[4096];;) {
    if (::poll(&poll_fd, 1, timeout_ms) == 0) {
      timed_out = true;
      ::kill(pid, SIGKILL);
      break;
    }
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (timed_out) return "still running after " + std::to_string(timeout_ms) + " ms";
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return out;
}

// A tmpfs of a few kilobytes mounted at dir for the life of the object.
class SmallTmpfs {
 public:
  SmallTmpfs(const fs::path& dir, size_t bytes) : dir_(dir) {
    fs::create_directories(dir);
    const std::string options = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("gradlab-test", dir.c_str(), "tmpfs", 0, options.c_str()) == 0) {
      mounted_ = true;
    } else {
      error_ = std::strerror(errno);
    }
  }
  ~SmallTmpfs() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }
  bool make_read_only() {
    return ::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0;
  }

 private:
  fs::path dir_;
  bool mounted_ = false;
  std::string error_;
};

#define SKIP_UNLESS_MOUNTED(tmpfs)                                                           \
  if (!(tmpfs).mounted()) {                                                                  \
    GTEST_SKIP() << "cannot mount a tmpfs here (" << (tmpfs).error()                         \
                 << "): the full and read-only file system cases need root (CAP_SYS_ADMIN)"; \
  }

class CheckpointErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    dir_ = fs::temp_directory_path() /
           ("gradlab-test-checkpoint-errors-" + std::to_string(::getpid()) + "-" + test);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (dir_ / name).string(); }

  static std::set<std::string> listing(const fs::path& dir) {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }

  // The one-line CheckpointError message of read_checkpoint(path), run in a child.
  static std::string load_error(const std::string& path) {
    const std::string result = in_child([&] { read_checkpoint(path); });
    EXPECT_TRUE(result.starts_with("error: ")) << path << ": " << result;
    EXPECT_FALSE(contains(result, "\n")) << result;
    return result.starts_with("error: ") ? result.substr(7) : result;
  }

  fs::path dir_;
};

// --- Saving onto a failing file system ------------------------------------------------------

// A save that does not fit: for several sizes of file system (so the write fails at different
// points), one line naming the file and the system's reason, no crash, no temporary file left,
// and the previous checkpoint unchanged.
TEST_F(CheckpointErrors, SaveOnAFullDiskIsOneLineAndKeepsThePreviousFile) {
  for (const size_t kib : {48, 96, 160}) {
    SCOPED_TRACE(std::to_string(kib) + " KiB file system");
    const fs::path mount = dir_ / ("fs-" + std::to_string(kib));
    const SmallTmpfs tmpfs(mount, kib * 1024);
    SKIP_UNLESS_MOUNTED(tmpfs);
    const std::string path = (mount / "ckpt.h5").string();
    save_checkpoint(path, small());
    const std::string before = testing::read_text(path);

    const std::string result = in_child([&] { save_checkpoint(path, large()); });
    const std::string temp = path + ".tmp-";
    EXPECT_TRUE(result.starts_with("error: " + path + ": cannot write temporary file " + temp))
        << result;
    EXPECT_TRUE(result.ends_with(": No space left on device")) << result;
    EXPECT_FALSE(contains(result, "\n")) << result;
    EXPECT_EQ(listing(mount), std::set<std::string>{"ckpt.h5"});
    EXPECT_EQ(testing::read_text(path), before);
    EXPECT_EQ(read_checkpoint(path).train.step, 3);
  }
}

TEST_F(CheckpointErrors, SaveOnAReadOnlyFileSystemKeepsThePreviousFile) {
  const fs::path mount = dir_ / "fs";
  SmallTmpfs tmpfs(mount, 256 * 1024);
  SKIP_UNLESS_MOUNTED(tmpfs);
  const std::string path = (mount / "ckpt.h5").string();
  save_checkpoint(path, small());
  const std::string before = testing::read_text(path);
  ASSERT_TRUE(tmpfs.make_read_only()) << std::strerror(errno);

  const std::string result = in_child([&] { save_checkpoint(path, large()); });
  EXPECT_TRUE(result.starts_with("error: " + path + ": cannot create temporary file")) << result;
  EXPECT_TRUE(result.ends_with(": Read-only file system")) << result;
  EXPECT_EQ(listing(mount), std::set<std::string>{"ckpt.h5"});
  EXPECT_EQ(testing::read_text(path), before);
}

// The command line: a run directory on a full file system ends `gradlab train` with exit 1 and
// one line, not a crash, and leaves no temporary file.
TEST_F(CheckpointErrors, TrainOnAFullDiskExitsWithOneLine) {
  const fs::path mount = dir_ / "fs";
  const SmallTmpfs tmpfs(mount, 16 * 1024);
  SKIP_UNLESS_MOUNTED(tmpfs);
  const fs::path run = mount / "run";
  const CommandResult r = run_gradlab(
      {"train",     "--length", "2", "--symbols",    "3", "--d-model",         "8", "--heads",
       "2",         "--layers", "1", "--d-ff",       "8", "--batch-size",      "2", "--eval-size",
       "2",         "--steps",  "2", "--eval-every", "1", "--target-accuracy", "0", "--out",
       run.string()});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(contains(r.err, "No space left on device")) << r.err;
  for (const auto& name : listing(run)) {
    EXPECT_FALSE(contains(name, ".tmp-")) << name;
  }
}

// --- Files that are not checkpoints ----------------------------------------------------------

// Refused by their type before they are opened: opening a FIFO would block until something
// writes to it (the child's time limit turns that into a failure).
TEST_F(CheckpointErrors, NonRegularFilesAreRefusedBeforeOpening) {
  const std::string fifo = file("fifo.h5");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  EXPECT_EQ(load_error(fifo), fifo + ": not a regular file: a FIFO");
  EXPECT_EQ(in_child([&] { read_checkpoint_config(fifo); }),
            "error: " + fifo + ": not a regular file: a FIFO");

  const std::string socket_path = file("socket.h5");
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof address.sun_path);
  std::strcpy(address.sun_path, socket_path.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0)
      << std::strerror(errno);
  EXPECT_EQ(load_error(socket_path), socket_path + ": not a regular file: a socket");
  ::close(sock);

  EXPECT_EQ(load_error(dir_.string()), dir_.string() + ": not a regular file: a directory");
  EXPECT_EQ(load_error("/dev/null"), "/dev/null: not a regular file: a character device");
}

// Short files get plain words, not HDF5's parser messages.
TEST_F(CheckpointErrors, ShortFilesAreNotCheckpoints) {
  const std::string signature = file("signature.h5");
  write_bytes(signature, "\x89HDF\r\n\x1a\n");  // the 8-byte HDF5 signature alone
  EXPECT_TRUE(load_error(signature).starts_with(signature +
                                                ": not a readable HDF5 file, so not a checkpoint"));

  const std::string eight = file("eight.h5");
  write_bytes(eight, "12345678");
  EXPECT_EQ(load_error(eight), eight + ": not an HDF5 file");

  const std::string empty = file("empty.h5");
  write_bytes(empty, "");
  EXPECT_EQ(load_error(empty), empty + ": not an HDF5 file");
}

// --- Checksums on values --------------------------------------------------------------------

TEST_F(CheckpointErrors, TensorsAreStoredWithFletcher32) {
  const std::string path = file("ckpt.h5");
  save_checkpoint(path, small());
  H5::H5File h5(path, H5F_ACC_RDONLY);
  const auto layout = [&](const std::string& name) {
    return h5.openDataSet(name).getCreatePlist();
  };
  for (const char* name : {"/model/embed.weight", "/optimizer/embed.weight/momentum_buffer"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(layout(name).getLayout(), H5D_CHUNKED);
    EXPECT_TRUE(layout(name).allFiltersAvail());
    ASSERT_EQ(layout(name).getNfilters(), 1);
    unsigned flags = 0, config = 0;
    size_t count = 0;
    char filter_name[32];
    EXPECT_EQ(
        layout(name).getFilter(0, flags, count, nullptr, sizeof filter_name, filter_name, config),
        H5Z_FILTER_FLETCHER32);
  }
  // A scalar is kept inside its object header, which HDF5 checksums.
  EXPECT_EQ(layout("/model/scale").getLayout(), H5D_COMPACT);
}

TEST_F(CheckpointErrors, AFlippedByteInAValueIsAChecksumError) {
  const std::string path = file("ckpt.h5");
  save_checkpoint(path, small());
  std::string bytes = testing::read_text(path);
  const float value = 1234.5678f;
  const std::string pattern(reinterpret_cast<const char*>(&value), sizeof value);
  const size_t at = bytes.find(pattern);
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.rfind(pattern), at) << "the value must occur once";
  bytes[at + 1] ^= 0x10;
  write_bytes(path, bytes);
  EXPECT_EQ(load_error(path),
            path +
                ": /model/embed.weight: values fail their Fletcher-32 checksum: the file is "
                "damaged");
}

// A checkpoint of format version 1 written before the checksums (contiguous datasets, no
// filter) loads and restores into a model.
TEST_F(CheckpointErrors, CheckpointsWithoutChecksumsStillLoad) {
  const std::string path = std::string(GRADLAB_TEST_FIXTURES_DIR) + "/checkpoint-v1-contiguous.h5";
  {
    H5::H5File h5(path, H5F_ACC_RDONLY);
    EXPECT_EQ(h5.openDataSet("/model/head.weight").getCreatePlist().getLayout(), H5D_CONTIGUOUS);
  }
  const CheckpointData data = read_checkpoint(path);
  EXPECT_EQ(data.train.step, 1);
  EXPECT_TRUE(std::isnan(data.train.loss_level)) << "not kept then: none yet";
  EXPECT_FALSE(data.model.empty());
  EXPECT_FALSE(data.optimizer_state.empty());
  const LoadedRun run = load_run(path);
  EXPECT_EQ(run.config.task.name, "copy");
}

// --- Declared sizes -------------------------------------------------------------------------

// Adds dataset name to /model of path: float32 of shape dims, chunked as chunk, with deflate if
// asked; write(dataset) may write some of it.
void add_chunked(const std::string& path, const std::string& name, const std::vector<hsize_t>& dims,
                 const std::vector<hsize_t>& chunk, bool deflate,
                 const std::function<void(const H5::DataSet&)>& write = {}) {
  H5::Exception::dontPrint();
  H5::H5File h5(path, H5F_ACC_RDWR);
  H5::DSetCreatPropList plist;
  plist.setChunk(static_cast<int>(chunk.size()), chunk.data());
  if (deflate) plist.setDeflate(1);
  const H5::DataSet dataset = h5.openGroup("model").createDataSet(
      name, H5::PredType::IEEE_F32LE, H5::DataSpace(static_cast<int>(dims.size()), dims.data()),
      plist);
  if (write) write(dataset);
}

// Writes bytes as the chunk at offset as they are, without HDF5's filters (a damaged chunk).
void write_raw_chunk(const H5::DataSet& dataset, const std::vector<hsize_t>& offset,
                     const std::string& bytes) {
  ASSERT_GE(
      H5Dwrite_chunk(dataset.getId(), H5P_DEFAULT, 0, offset.data(), bytes.size(), bytes.data()),
      0);
}

// 2^28 elements (1 GiB of float32) declared in a small file and never written: refused from
// the chunk count, before anything is allocated.
TEST_F(CheckpointErrors, NeverWrittenChunkedDatasetsAreRefused) {
  const std::string path = file("ckpt.h5");
  save_checkpoint(path, small());
  add_chunked(path, "huge", {16384, 16384}, {1024, 1024}, true);
  EXPECT_EQ(load_error(path), path + ": /model/huge: values not written: 0 of 256 chunks stored");

  save_checkpoint(path, small());
  add_chunked(path, "part", {4, 4}, {2, 2}, false, [](const H5::DataSet& d) {
    write_raw_chunk(d, {2, 0}, std::string(16, '\0'));
  });
  EXPECT_EQ(load_error(path), path + ": /model/part: values not written: 1 of 4 chunks stored");
}

TEST_F(CheckpointErrors, ChunksSmallerThanTheirValuesAreRefused) {
  const std::string path = file("ckpt.h5");
  save_checkpoint(path, small());
  add_chunked(path, "short", {4}, {4}, false,
              [](const H5::DataSet& d) { write_raw_chunk(d, {0}, std::string(8, '\0')); });
  EXPECT_EQ(load_error(path), path + ": /model/short: stores 8 bytes but its chunks need 16");

  // 4 MiB of values in 8 compressed bytes: more than deflate's 1032:1.
  save_checkpoint(path, small());
  add_chunked(path, "bomb", {1 << 20}, {1 << 20}, true,
              [](const H5::DataSet& d) { write_raw_chunk(d, {0}, std::string(8, '\0')); });
  EXPECT_EQ(load_error(path), path +
                                  ": /model/bomb: stores 8 compressed bytes for 4194304, more "
                                  "than deflate can compress");
}

// Given the model it restores into, read_checkpoint reports a dataset the model does not have
// before it reads any value: here the unexpected dataset's compressed chunk is damaged.
TEST_F(CheckpointErrors, UnexpectedNamesAreReportedBeforeAnyValueIsRead) {
  const std::string path = file("ckpt.h5");
  save_checkpoint(path, small());
  add_chunked(path, "extra", {16}, {16}, true,
              [](const H5::DataSet& d) { write_raw_chunk(d, {0}, std::string(32, 'x')); });
  const CheckpointData live = small();
  EXPECT_EQ(in_child([&] {
              read_checkpoint(path, {live.model, live.optimizer_state});
            }),
            "error: " + path + ": /model/extra: unexpected: not in the model");
  // Without the model, the damaged values are what is reported.
  EXPECT_TRUE(load_error(path).starts_with(path + ": /model/extra: ")) << load_error(path);
}

// `gradlab eval` on a checkpoint with a never-written 2^28-element dataset: exit 1, one line.
TEST_F(CheckpointErrors, EvalRefusesADeclaredButUnwrittenDataset) {
  const std::string run = file("run");
  const CommandResult trained = run_gradlab(
      {"train", "--length", "2", "--symbols",    "3", "--d-model",         "8", "--heads",
       "2",     "--layers", "1", "--d-ff",       "8", "--batch-size",      "2", "--eval-size",
       "2",     "--steps",  "1", "--eval-every", "1", "--target-accuracy", "0", "--out",
       run});
  ASSERT_EQ(trained.exit_code, 0) << trained.describe();
  const std::string path = run + "/step-000001.h5";
  add_chunked(path, "extra.weight", {16384, 16384}, {16384, 16384}, false);
  const CommandResult r = run_gradlab({"eval", "--checkpoint", path});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err, "gradlab eval: " + path +
                       ": /model/extra.weight: values not written: 0 of 1 chunks stored\n");
}

// `gradlab train --resume` from a checkpoint whose head.weight has another shape, and whose values
// there are damaged too: the shape is named, as every name and shape is checked before the first
// value is read (reading first would report the damage), and nothing is written.
TEST_F(CheckpointErrors, ResumeChecksEveryShapeBeforeReadingAValue) {
  const std::string run = file("run");
  CommandResult r = run_gradlab(testing::with({"train", "--out", run}, testing::kTiny));
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const std::string path = run + "/step-000002.h5";
  std::vector<hsize_t> dims(2);
  {
    H5::H5File h5(path, H5F_ACC_RDWR);
    h5.openDataSet("/model/head.weight").getSpace().getSimpleExtentDims(dims.data());
    h5.unlink("/model/head.weight");
  }
  const std::vector<hsize_t> other = {dims[0], dims[1] + 1};
  add_chunked(path, "head.weight", other, other, true, [](const H5::DataSet& d) {
    write_raw_chunk(d, {0, 0}, std::string(32, 'x'));
  });
  const auto before = fs::last_write_time(run + "/metrics.csv");
  r = run_gradlab({"train", "--resume", path, "--steps", "4"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err, "gradlab train: " + path + ": /model/head.weight: shape [" +
                       std::to_string(other[0]) + "," + std::to_string(other[1]) +
                       "] does not match the model's [" + std::to_string(dims[0]) + "," +
                       std::to_string(dims[1]) + "]\n");
  EXPECT_FALSE(fs::exists(run + "/step-000004.h5"));
  EXPECT_EQ(fs::last_write_time(run + "/metrics.csv"), before);
}

}  // namespace test_checkpoint_errors
}  // namespace gradlab::train
