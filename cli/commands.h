// The gradlab subcommands. Each takes the arguments after its name and returns the process exit
// code: 0 success, 1 runtime failure, 2 usage error (after printing the reason and usage).
#pragma once

#include <string>
#include <vector>

#include "train/process_group.h"

namespace gradlab::cli {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// How a message about this process alone begins, as the README promises: "gradlab train (rank 1
// of 2): " in a group of several processes, "gradlab train: " alone.
std::string message_prefix(const std::string& command, const train::ProcessGroup& group);

int run_gradcheck(const std::vector<std::string>& args);
int run_explain(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_predict(const std::vector<std::string>& args);
int run_attention(const std::vector<std::string>& args);
int run_inspect(const std::vector<std::string>& args);
int run_sample(const std::vector<std::string>& args);
int run_hooks(const std::vector<std::string>& args);
int run_activations(const std::vector<std::string>& args);
int run_ablate(const std::vector<std::string>& args);
int run_patch(const std::vector<std::string>& args);
int run_heads(const std::vector<std::string>& args);
int run_lens(const std::vector<std::string>& args);

// The same command lines, parsed and validated exactly as run_<command> does before it starts
// its work, and no further (for the command-line fuzzer): returns the exit code run_<command>
// returns at that point, 0 after --help or 2 after a usage error, or -1 when it would go on.
// Nothing is trained, loaded, written or printed to stdout except --help; parse_train reads a
// --config file and a --resume checkpoint's configuration and step, as run_train does while
// parsing. A --checkpoint or
// --resume that names a special file (a FIFO, a device) throws CheckpointError, as a bad
// --resume checkpoint does: run_<command> lets it reach main, which exits 1.
int parse_gradcheck(const std::vector<std::string>& args);
int parse_explain(const std::vector<std::string>& args);
int parse_train(const std::vector<std::string>& args);
int parse_eval(const std::vector<std::string>& args);
int parse_predict(const std::vector<std::string>& args);
int parse_attention(const std::vector<std::string>& args);
int parse_inspect(const std::vector<std::string>& args);
int parse_sample(const std::vector<std::string>& args);
int parse_hooks(const std::vector<std::string>& args);
int parse_activations(const std::vector<std::string>& args);
int parse_ablate(const std::vector<std::string>& args);
int parse_patch(const std::vector<std::string>& args);
int parse_heads(const std::vector<std::string>& args);
int parse_lens(const std::vector<std::string>& args);

}  // namespace gradlab::cli
