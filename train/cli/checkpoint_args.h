// What eval, predict and attention share: the --checkpoint and --threads flags, and reading
// --input as a prompt of the checkpoint's task.
#pragma once

#include <boost/program_options.hpp>
#include <string>
#include <vector>

#include "data/task.h"

namespace gradlab::cli {

// The command line of eval, predict or attention: the options and the values bound to them.
struct CheckpointArgs {
  explicit CheckpointArgs(const char* caption) : options(caption) {}
  boost::program_options::options_description options;
  std::string checkpoint, input, out;
  int64_t threads = 1;
  boost::program_options::variables_map vm;
};

// Parses --checkpoint (required), --threads and the options already added to a.options;
// returns -1 to go on or an exit code.
int parse_with_checkpoint(const std::string& command, const std::vector<std::string>& args,
                          CheckpointArgs& a);

// Reads --input ("3 1 4 1 5") as a prompt of task into prompt; returns -1 to go on or the
// usage exit code after saying what is wrong.
int read_prompt(const std::string& command, const std::string& input, const data::Task& task,
                const boost::program_options::options_description& options,
                std::vector<int64_t>& prompt);

// "3 1 4 1 5"
std::string join(const std::vector<int64_t>& tokens);

}  // namespace gradlab::cli
