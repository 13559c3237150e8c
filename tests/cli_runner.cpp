#include "tests/cli_runner.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <stdexcept>

#include "cli/command_table.h"
#include "tests/test_helpers.h"
#include "train/fingerprint.h"

extern char** environ;

namespace gradlab::testing {
namespace cli_runner {

using Clock = std::chrono::steady_clock;

[[noreturn]] void fail(const std::string& what, int error) {
  throw std::runtime_error(what + ": " + std::strerror(error));
}

// Closes a descriptor once, on scope exit or on demand.
struct Fd {
  int fd = -1;
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

struct SpawnSetup {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  SpawnSetup() {
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_init(&attr);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

int milliseconds_until(Clock::time_point t) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
  return ms < 0 ? 0 : static_cast<int>(ms);
}

}  // namespace cli_runner

std::string CommandResult::describe() const {
  std::string text = "exit code " + std::to_string(exit_code);
  if (term_signal) text += ", killed by signal " + std::to_string(term_signal);
  if (timed_out) text += " (timed out)";
  return text + "\n--- stdout ---\n" + out + "--- stderr ---\n" + err;
}

CommandResult run_command(const std::string& program, const std::vector<std::string>& args,
                          const RunOptions& options) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) cli_runner::fail("pipe", errno);
  cli_runner::Fd out_read{out_pipe[0]}, out_write{out_pipe[1]};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) cli_runner::fail("pipe", errno);
  cli_runner::Fd err_read{err_pipe[0]}, err_write{err_pipe[1]};

  cli_runner::SpawnSetup setup;
  // dup2 clears close-on-exec on the new descriptor; every pipe end is closed by exec.
  posix_spawn_file_actions_addopen(&setup.actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&setup.actions, out_write.fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&setup.actions, err_write.fd, STDERR_FILENO);
  // Default dispositions and an empty mask, whatever the test runner inherited (a background
  // job starts with SIGINT ignored).
  sigset_t defaults, empty;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  sigemptyset(&empty);
  posix_spawnattr_setsigdefault(&setup.attr, &defaults);
  posix_spawnattr_setsigmask(&setup.attr, &empty);
  posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<std::string> argv_strings{program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  std::vector<std::string> environment_strings;
  for (char** variable = environ; *variable != nullptr; ++variable) {
    const std::string entry = *variable;
    if (!options.environment.contains(entry.substr(0, entry.find('=')))) {
      environment_strings.push_back(entry);
    }
  }
  for (const auto& [name, value] : options.environment) {
    if (!value.empty()) environment_strings.push_back(name + "=" + value);
  }
  std::vector<char*> envp;
  for (std::string& s : environment_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  pid_t pid = 0;
  if (const int error = ::posix_spawn(&pid, program.c_str(), &setup.actions, &setup.attr,
                                      argv.data(), envp.data());
      error != 0) {
    cli_runner::fail("posix_spawn " + program, error);
  }
  out_write.reset();
  err_write.reset();

  CommandResult result;
  const auto start = cli_runner::Clock::now();
  const auto deadline = start + std::chrono::milliseconds(options.timeout_ms);
  const bool timed_signal = options.signal != 0 && options.signal_after_ms >= 0;
  const auto signal_time =
      start + std::chrono::milliseconds(timed_signal ? options.signal_after_ms : 0);
  auto maybe_signal = [&] {
    if (options.signal == 0 || result.signal_sent) return;
    const bool printed = !options.signal_after_output.empty() &&
                         result.out.find(options.signal_after_output) != std::string::npos;
    if (printed || (timed_signal && cli_runner::Clock::now() >= signal_time)) {
      const pid_t target = options.signal_target ? options.signal_target(pid) : pid;
      if (target <= 0) return;
      ::kill(target, options.signal);
      result.signal_sent = true;
    }
  };

  cli_runner::Fd* fds[] = {&out_read, &err_read};
  std::string* sinks[] = {&result.out, &result.err};
  while (out_read.fd >= 0 || err_read.fd >= 0) {
    maybe_signal();
    if (!result.timed_out && cli_runner::Clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      result.timed_out = true;
    }
    int wait_ms = result.timed_out ? 100 : cli_runner::milliseconds_until(deadline);
    if (timed_signal && !result.signal_sent) {
      wait_ms = std::min(wait_ms, cli_runner::milliseconds_until(signal_time));
    }
    pollfd polled[2];
    int count = 0;
    int which[2];
    for (int i = 0; i < 2; ++i) {
      if (fds[i]->fd < 0) continue;
      polled[count] = {fds[i]->fd, POLLIN, 0};
      which[count++] = i;
    }
    const int ready = ::poll(polled, static_cast<nfds_t>(count), wait_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      cli_runner::fail("poll", errno);
    }
    for (int k = 0; k < count; ++k) {
      if (!(polled[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buffer[4096];
      const ssize_t n = ::read(polled[k].fd, buffer, sizeof buffer);
      if (n > 0) {
        sinks[which[k]]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        fds[which[k]]->reset();
      }
    }
  }

  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) cli_runner::fail("waitpid", errno);
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  return result;
}

CommandResult parse_gradlab(const std::vector<std::string>& args) {
  const cli::Command* const row = args.empty() ? nullptr : cli::find_command(args[0]);
  if (!row) throw std::invalid_argument("parse_gradlab: no command row named by the arguments");
  std::ostringstream out, err;
  std::streambuf* const saved_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* const saved_err = std::cerr.rdbuf(err.rdbuf());
  CommandResult result;
  try {
    result.exit_code = row->parse({args.begin() + 1, args.end()});
  } catch (...) {
    std::cout.rdbuf(saved_out);
    std::cerr.rdbuf(saved_err);
    throw;
  }
  std::cout.rdbuf(saved_out);
  std::cerr.rdbuf(saved_err);
  result.out = out.str();
  result.err = err.str();
  return result;
}

CommandResult run_gradlab(const std::vector<std::string>& args, const RunOptions& options) {
  return run_command(GRADLAB_BINARY, args, options);
}

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "gradlab-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) cli_runner::fail("mkdtemp " + pattern, errno);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::file(const std::string& name) const {
  return (path_ / name).string();
}

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

namespace cli_runner {

const std::filesystem::path& shared_runs_root() {
  static const std::filesystem::path root = [] {
    const std::filesystem::path dir =
        std::filesystem::path(GRADLAB_BINARY).parent_path() / "shared-runs";
    std::filesystem::create_directories(dir);
    return dir;
  }();
  return root;
}

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// An exclusive lock on `path` (created if need be), held while this lives.
class FileLock {
 public:
  explicit FileLock(const std::filesystem::path& path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) {
      throw std::runtime_error("cannot lock " + path.string() + ": " + std::strerror(errno));
    }
  }
  ~FileLock() { ::close(fd_); }  // closing releases the lock
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace cli_runner

SharedRun shared_run(const std::vector<std::string>& train_args) {
  namespace fs = std::filesystem;
  const fs::path binary = GRADLAB_BINARY;
  const auto stamp = fs::last_write_time(binary).time_since_epoch().count();
  const uintmax_t size = fs::file_size(binary);
  uint64_t key = train::fingerprint(&stamp, sizeof stamp);
  key = train::fingerprint(&size, sizeof size, key);
  for (const std::string& arg : train_args) {
    key = train::fingerprint(arg.data(), arg.size() + 1, key);  // the '\0' parts the arguments
  }
  const fs::path run = cli_runner::shared_runs_root() / cli_runner::hex(key);
  const cli_runner::FileLock lock(cli_runner::shared_runs_root() /
                                  (cli_runner::hex(key) + ".lock"));
  const fs::path done = cli_runner::shared_runs_root() / (cli_runner::hex(key) + ".done");
  if (fs::exists(done)) return {run, read_text(done)};
  fs::remove_all(run);  // what a failed attempt left
  std::vector<std::string> args = train_args;
  args.insert(args.end(), {"--out", run.string()});
  const CommandResult r = run_gradlab(args);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  if (r.exit_code == 0) std::ofstream(done, std::ios::binary) << r.out;
  return {run, r.out};
}

std::string shared_file(const std::string& name, const std::string& text) {
  const std::filesystem::path path =
      cli_runner::shared_runs_root() /
      (cli_runner::hex(train::fingerprint(text.data(), text.size())) + "-" + name);
  const cli_runner::FileLock lock(path.string() + ".lock");
  if (!std::filesystem::exists(path)) {
    const std::string part = path.string() + ".part";
    std::ofstream(part, std::ios::binary) << text;
    std::filesystem::rename(part, path);
  }
  return path.string();
}

std::string tiny_text_data() {
  std::string text;
  for (int i = 0; i < 40; ++i) text += kTinyText;
  return shared_file("tiny-text.txt", text);
}

std::string tiny_text_model() {
  return (shared_run({"train",
                      "--task",
                      "text",
                      "--data",
                      tiny_text_data(),
                      "--context",
                      "8",
                      "--d-model",
                      "8",
                      "--heads",
                      "2",
                      "--layers",
                      "2",
                      "--d-ff",
                      "8",
                      "--batch-size",
                      "4",
                      "--eval-iters",
                      "2",
                      "--steps",
                      "20",
                      "--eval-every",
                      "10"})
              .dir /
          "best.h5")
      .string();
}

std::string toy_checkpoint(const std::vector<std::string>& flags, const std::string& model) {
  std::vector<std::string> args = {"train", "--model", model};
  args.insert(args.end(), flags.begin(), flags.end());
  return (shared_run(args).dir / "best.h5").string();
}

void expect_usage_error(const CommandResult& r, const std::string& command, const Named& named) {
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(r.out, "") << r.describe();
  EXPECT_TRUE(first_line(r.err).starts_with("gradlab " + command + ": ")) << r.err;
  for (const std::string& part : named.parts) {
    EXPECT_TRUE(contains(first_line(r.err), part)) << "does not name " << part << ":\n" << r.err;
  }
  EXPECT_TRUE(contains(r.err, "Options:")) << "no usage printed:\n" << r.err;
  EXPECT_TRUE(contains(r.err, "--help")) << r.err;
}

void expect_runtime_failure(const CommandResult& r, const std::string& command,
                            const Named& named) {
  EXPECT_FALSE(r.timed_out) << r.describe();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(first_line(r.err).starts_with("gradlab " + command + ": ")) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line:\n" << r.err;
  for (const std::string& part : named.parts) {
    EXPECT_TRUE(contains(r.err, part)) << "does not name " << part << ":\n" << r.err;
  }
  EXPECT_FALSE(contains(r.err, "Options:")) << "a runtime failure printed the usage:\n" << r.err;
}

}  // namespace gradlab::testing
