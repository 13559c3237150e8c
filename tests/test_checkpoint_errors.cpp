// Checkpoints under bad conditions: paths that are not regular files, files too short to be
// HDF5. Every case must end in one CheckpointError line naming the file, never in a crash or a
// hang.
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
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "cli_runner.h"
#include "tests/test_helpers.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::contains;
using testing::run_gradlab;

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

}  // namespace
}  // namespace gradlab::train
