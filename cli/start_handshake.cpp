// The start-up handshake of a job's processes (start_handshake.h).
#include "cli/start_handshake.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <vector>

#include "autograd/format.h"
#include "cli/commands.h"
#include "train/fingerprint.h"

namespace gradlab::cli {
namespace {

double start_timeout_seconds() {
  const char* text = std::getenv("GRADLAB_START_TIMEOUT");
  if (!text) return kDefaultStartTimeout;
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || !(seconds > 0) || !std::isfinite(seconds)) {
    throw std::runtime_error("GRADLAB_START_TIMEOUT=" + quote(text) +
                             ": must be a number of seconds above 0");
  }
  return seconds;
}

// The fingerprint of this process's own executable file, in hexadecimal.
std::string binary_fingerprint() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx",
                static_cast<unsigned long long>(train::fingerprint(bytes.data(), bytes.size())));
  return hex;
}

}  // namespace

StartDeadline::StartDeadline(const std::string& command) {
  const double seconds = start_timeout_seconds();
  watch_ = std::thread([this, seconds, command] {
    std::unique_lock lock(mutex_);
    if (met_.wait_for(lock, std::chrono::duration<double>(seconds), [this] { return done_; })) {
      return;
    }
    // One write, as the other processes' messages may interleave; then no destructor and no MPI
    // call: the main thread may be inside MPI's start-up.
    const std::string line = "gradlab " + bounded(command) +
                             ": the job's processes did not all start within " +
                             format_number(seconds) +
                             " s (GRADLAB_START_TIMEOUT): one of them runs another program or "
                             "an older gradlab, or could not start; stopping\n";
    [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line.data(), line.size());
    std::_Exit(kExitFailure);
  });
}

StartDeadline::~StartDeadline() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  met_.notify_one();
  watch_.join();
}

int check_same_command(const std::string& command, const std::string& version,
                       train::ProcessGroup& group) {
  struct Check {
    std::string mine;
    bool readable;  // worth quoting in the message (a fingerprint is not)
  };
  const std::vector<Check> checks = {
      {"gradlab " + bounded(command), true},
      {"gradlab " + version, true},
      {binary_fingerprint(), false},
  };
  for (const Check& check : checks) {
    const std::vector<std::string> all = group.gather_text(check.mine);
    const auto other = std::find_if(all.begin(), all.end(),
                                    [&](const std::string& text) { return text != all[0]; });
    if (other == all.end()) continue;
    if (group.rank() == 0) {
      const int rank = static_cast<int>(other - all.begin());
      std::cerr << "gradlab " + bounded(command) + ": rank " + std::to_string(rank) + " of " +
                       std::to_string(group.size()) + " " +
                       (check.readable ? "runs " + *other + ", rank 0 " + all[0]
                                       : "has a different gradlab binary than rank 0") +
                       "; every process of a job must run the same gradlab and command (see "
                       "docs/parallel.md: Several processes or machines)\n"
                << std::flush;
    }
    return kExitFailure;
  }
  return -1;
}

}  // namespace gradlab::cli
