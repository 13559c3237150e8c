// Child processes of a sweep (child_runs.h), started with posix_spawn and polled.
#include "train/sweep/child_runs.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <utility>

#include "autograd/error.h"
#include "train/stop_signals.h"

extern char** environ;

namespace gradlab::train {
namespace {

pid_t spawn(const std::string& program, const ChildRun& run) {
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, run.log.c_str(),
                                   O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_setpgroup(&attr, 0);
  // The child starts with default signal handling, whatever this process installed.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> argv{const_cast<char*>(program.c_str())};
  for (const std::string& a : run.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (error != 0) {
    throw FileError(program + ": cannot start it (output to " + run.log +
                    "): " + std::strerror(error));
  }
  return pid;
}

}  // namespace

bool run_children(const std::string& program, const std::vector<ChildRun>& runs, int64_t jobs,
                  const std::function<void(size_t, int)>& ended) {
  const StopSignals signals{SIGINT, SIGTERM};
  std::vector<std::pair<pid_t, size_t>> running;  // pid, index into runs
  size_t next = 0;
  bool stopping = false;
  while (running.size() > 0 || (next < runs.size() && !stopping)) {
    if (!stopping && StopSignals::received() != 0) {
      stopping = true;
      for (const auto& [pid, index] : running) kill(pid, SIGTERM);
    }
    if (!stopping && next < runs.size() && static_cast<int64_t>(running.size()) < jobs) {
      running.emplace_back(spawn(program, runs[next]), next);
      ++next;
      continue;
    }
    bool reaped = false;
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      const pid_t done = waitpid(it->first, &status, WNOHANG);
      if (done == 0 || (done < 0 && errno == EINTR)) {
        ++it;
        continue;
      }
      const int code = done > 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      const size_t index = it->second;
      it = running.erase(it);
      reaped = true;
      ended(index, code);
    }
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !stopping;
}

}  // namespace gradlab::train
