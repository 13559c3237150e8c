// Running the gradlab binary from tests: its exit code, stdout and stderr, with an optional
// timeout and an optional signal sent once it has printed something or after a delay. The
// process is started with posix_spawn and an argument vector (no shell), so arguments need no
// quoting. Also a self-deleting temporary directory for the files a test writes, the smallest
// training command lines (a toy task's and a language model's), and the assertions on how a
// command fails.
#pragma once

#include <sys/types.h>

#include <csignal>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace gradlab::testing {

struct CommandResult {
  int exit_code = -1;      // the exit status, or -1 if a signal ended the process
  int term_signal = 0;     // the signal that ended the process, 0 if it exited
  bool timed_out = false;  // killed (SIGKILL) after RunOptions::timeout_ms
  bool signal_sent = false;
  std::string out;  // everything written to stdout
  std::string err;  // everything written to stderr

  // For assertion messages: the exit status and both streams.
  std::string describe() const;
};

struct RunOptions {
  int timeout_ms = 120000;  // SIGKILL after this long
  // If signal is not 0, it is sent once, when the first of these happens: stdout contains
  // signal_after_output (when not empty), or signal_after_ms milliseconds have passed (when
  // >= 0).
  int signal = 0;
  std::string signal_after_output;
  int signal_after_ms = -1;
  // The process the signal goes to, given the started one's pid (unset: that process itself;
  // a pid <= 0: nobody yet, asked again until one is given).
  std::function<pid_t(pid_t)> signal_target;
  // Variables set for the process on top of this one's environment; an empty value unsets one.
  std::map<std::string, std::string> environment;
};

// Runs `program args...` with stdin from /dev/null and both outputs captured.
CommandResult run_command(const std::string& program, const std::vector<std::string>& args,
                          const RunOptions& options = {});

// Runs the gradlab executable under test with these arguments (after argv[0]).
CommandResult run_gradlab(const std::vector<std::string>& args, const RunOptions& options = {});

// The parse-only entry of the command table's row args[0] (cli/command_table.h) on the rest, in
// this process, its std::cout and std::cerr captured: exit_code is what that entry returns (2 a
// usage error, 0 after --help, -1 when the command would go on). For a test of a usage error,
// without the cost of a process start.
CommandResult parse_gradlab(const std::vector<std::string>& args);

// A fresh, uniquely named directory under the system temporary directory, deleted with
// everything in it when the object goes out of scope.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // path() / name, as a string.
  std::string file(const std::string& name) const;

 private:
  std::filesystem::path path_;
};

// The whole contents of a file, byte for byte (binary files too; "" if it cannot be read).
std::string read_text(const std::filesystem::path& path);

// Training options of the smallest model of the copy task: fast enough for every build,
// sanitizers included.
inline const std::vector<std::string> kTiny = {
    "--length", "2", "--symbols",    "3", "--d-model",         "8", "--heads",     "2",
    "--layers", "1", "--d-ff",       "8", "--batch-size",      "2", "--eval-size", "2",
    "--steps",  "2", "--eval-every", "1", "--target-accuracy", "0"};

// The text tiny_text_model trains on: a few short lines of lower-case words.
inline const std::string kTinyText = "the cat sat on the mat.\nthe dog sat on the log.\n";

// A training run several test processes read: its directory and what the training printed.
struct SharedRun {
  std::filesystem::path dir;
  std::string out;
};

// The run of `gradlab train <train_args> --out DIR`, trained once per build of the gradlab
// binary and then kept for every test process that asks for the same arguments: ctest
// runs each test in a process of its own, so a suite that trained its models in SetUpTestSuite
// trained them again for each of its tests (seconds each under the sanitizers). DIR is under
// the binary's directory (shared-runs/), named by the arguments and the binary's size and time;
// the first process trains while the others wait on a file lock. A test failure when training
// fails. Tests only read what is in it.
SharedRun shared_run(const std::vector<std::string>& train_args);

// The path of a file holding `text`, in the same directory, written once: the data of shared
// runs. Named by `name` and the text.
std::string shared_file(const std::string& name, const std::string& text);

// kTinyText repeated (a shared file), and the smallest character-level language model (context
// 8) trained on it: its best checkpoint (a shared run).
std::string tiny_text_data();
std::string tiny_text_model();

// The best checkpoint of a decoder-only ("decoder") or encoder-decoder ("seq2seq") model of the
// toy task `flags` describe (a shared run): the checkpoints a suite of command tests reads.
std::string toy_checkpoint(const std::vector<std::string>& flags, const std::string& model);

// What an error message must name: none, one or several parts.
struct Named {
  Named() = default;
  Named(const char* part) : parts{part} {}
  Named(std::string part) : parts{std::move(part)} {}
  Named(std::initializer_list<std::string> list) : parts(list) {}
  Named(std::vector<std::string> list) : parts(std::move(list)) {}
  std::vector<std::string> parts;
};

// Exit 2 within the timeout, nothing on stdout, and on stderr a first line
// "gradlab <command>: <reason>" naming every part of `named`, then the command's options.
void expect_usage_error(const CommandResult& r, const std::string& command,
                        const Named& named = {});

// Exit 1 within the timeout: one line "gradlab <command>: <reason>" naming every part of
// `named`, and no usage text.
void expect_runtime_failure(const CommandResult& r, const std::string& command,
                            const Named& named = {});

}  // namespace gradlab::testing
