// The first exchange of every gradlab process under mpirun, whatever its command: the job's
// processes must run the same gradlab build and command, or each would wait for ever in
// collectives the others never call (`train` next to `eval` hung both), and they must all get
// there within a bounded time, or a process that never joins would leave the others waiting.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "train/process_group.h"

namespace gradlab::cli {

// Seconds the processes of a job have to start and agree (StartDeadline) when the environment
// does not say otherwise.
constexpr double kDefaultStartTimeout = 60;

// While alive, ends this process (exit 1, after one line naming `command` and the time-out) if
// it is not destroyed within GRADLAB_START_TIMEOUT seconds (kDefaultStartTimeout when unset):
// the time joining the world and check_same_command may take. Exiting is all that is safe while
// MPI may still be starting; mpirun then ends the rest of the job. Throws std::runtime_error if
// GRADLAB_START_TIMEOUT is not a number of seconds above 0.
class StartDeadline {
 public:
  explicit StartDeadline(const std::string& command);
  ~StartDeadline();
  StartDeadline(const StartDeadline&) = delete;
  StartDeadline& operator=(const StartDeadline&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable met_;
  bool done_ = false;
  std::thread watch_;
};

// Refuses to go on unless every process of the group runs the same command of the same gradlab
// version and binary, rank 0 naming the first process that differs on stderr. A collective, and
// the first one every gradlab makes: it must keep its form from one version to the next, so that
// processes of different versions still meet in it. Returns -1 or kExitFailure.
int check_same_command(const std::string& command, const std::string& version,
                       train::ProcessGroup& group);

}  // namespace gradlab::cli
