// The exit codes of the gradlab commands (their table: cli/command_table.h), and how a message
// about one process begins.
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

}  // namespace gradlab::cli
