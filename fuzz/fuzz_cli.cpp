// libFuzzer target: the command-line parsing of every gradlab subcommand, through the parse-only
// entry of each row of the command table (cli/command_table.h), which validates exactly what the
// command's run validates before it starts its work, and then stops: nothing is trained, loaded
// or written.
//
// Input: argument words separated by '\n'; the first word names the subcommand (a row of the
// table), e.g. "train\n--steps\n0\n". Inputs
// with a word containing '/' are rejected: the fuzzer runs in a temporary directory holding a small
// valid checkpoint (ck.h5), a damaged one (bad.h5), a config file (run.ini), a directory (dir)
// and a FIFO (fifo), so --resume, --checkpoint, --config and --data reach real files of every
// kind, and no other file can be named. (Because of that working directory,
// give libFuzzer absolute paths for corpora and inputs, as scripts/fuzz.sh does.)
//
// What counts as a bug: any crash or sanitizer report; a return value other than -1 (go on),
// 0 (--help, which prints the options to stdout) or 2 (usage error: stderr starts with
// "gradlab <command>: " and shows the options); any exception other than the CheckpointError of
// a bad --resume file or of a special file given as a checkpoint (the command's run lets that one
// reach main, which exits 1). Opening the FIFO would wait forever: that is a hang.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "autograd/error.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/trainer.h"

namespace {

using namespace gradlab;
using namespace gradlab::cli;
using namespace gradlab::train;

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "fuzz_cli: %s\n", what.c_str());
  std::abort();
}

std::string& workdir() {
  static std::string dir;
  return dir;
}

void remove_workdir() {
  std::error_code ignored;
  std::filesystem::remove_all(workdir(), ignored);
}

// The files --resume and --config may name, in a fresh working directory (removed at exit).
void make_workdir() {
  std::string dir = (std::filesystem::temp_directory_path() / "gradlab-fuzz-cli-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr || ::chdir(dir.c_str()) != 0) bug("cannot make workdir");
  workdir() = dir;
  std::atexit(remove_workdir);
  RunConfig config;
  config.task.sequence.length = 2;
  config.task.sequence.num_symbols = 3;
  config.net.d_model = 8;
  config.net.attention.num_heads = 2;
  config.net.num_layers = 1;
  config.net.feed_forward.d_ff = 8;
  config.batch_size = 2;
  config.eval_size = 2;
  config.steps = 4;
  config.out_dir = ".";
  finalize(config);
  Trainer trainer(config);
  trainer.train_step();
  save_checkpoint("ck.h5", trainer.checkpoint());
  std::ofstream("run.ini") << to_config_file(config);
  std::ofstream("bad.h5") << "\x89HDF\r\n\x1a\n not really";
  std::filesystem::create_directory("dir");
  if (::mkfifo("fifo", 0600) != 0) bug("cannot make a FIFO");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  make_workdir();
  // Where train's parse-only entry's --config could otherwise wait for input.
  if (std::freopen("/dev/null", "r", stdin) == nullptr) bug("cannot reopen stdin");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words;
  std::string word;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      words.push_back(word);
      word.clear();
    } else {
      word += static_cast<char>(data[i]);
    }
  }
  if (!word.empty()) words.push_back(word);
  if (words.empty()) return -1;
  for (const std::string& w : words) {
    if (w.find('/') != std::string::npos) return -1;
  }
  const Command* const row = find_command(words[0]);
  if (!row) return -1;
  const std::string& command = words[0];
  const std::vector<std::string> args(words.begin() + 1, words.end());

  // Capture what the parser prints.
  std::ostringstream out, err;
  std::streambuf* const saved_out = std::cout.rdbuf(out.rdbuf());
  std::streambuf* const saved_err = std::cerr.rdbuf(err.rdbuf());
  int code = -1;
  std::string escaped;
  try {
    code = row->parse(args);
  } catch (const CheckpointError&) {
    code = kExitFailure;  // a bad checkpoint file: main prints it and exits 1
  } catch (const std::exception& e) {
    escaped = std::string(typeid(e).name()) + ": " + e.what();
  } catch (...) {
    escaped = "a non-standard exception";
  }
  std::cout.rdbuf(saved_out);
  std::cerr.rdbuf(saved_err);

  if (!escaped.empty()) bug(command + ": unexpected exception " + escaped);
  switch (code) {
    case -1:
    case kExitFailure:
      break;
    case kExitOk:
      if (out.str().find("Options:") == std::string::npos) bug(command + ": exit 0 without help");
      break;
    case kExitUsage:
      if (err.str().rfind("gradlab " + command + ": ", 0) != 0 ||
          err.str().find("Options:") == std::string::npos) {
        bug(command + ": usage error without reason and usage: " + err.str());
      }
      break;
    default:
      bug(command + ": unexpected return value " + std::to_string(code));
  }
  return 0;
}
