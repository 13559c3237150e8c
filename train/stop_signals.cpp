// The stop-signal flag and its handlers (stop_signals.h).
#include "train/stop_signals.h"

#include <atomic>

namespace gradlab::train {
namespace {

volatile std::sig_atomic_t received_signal = 0;
std::atomic<int> alive{0};

extern "C" void record_stop_signal(int signal) {
  if (received_signal == 0) received_signal = signal;
}

}  // namespace

StopSignals::StopSignals(std::initializer_list<int> signals) {
  if (alive++ == 0) received_signal = 0;
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  // Interrupted system calls restart: the step goes on, and the loop looks at the flag after it.
  // The handler runs once: a second signal has its default effect and ends a step or a save that
  // takes too long.
  action.sa_flags = SA_RESTART | SA_RESETHAND;
  for (const int signal : signals) {
    struct sigaction old {};
    if (sigaction(signal, nullptr, &old) != 0) continue;
    // A signal the process was started ignoring (nohup, a background job) stays ignored.
    if (old.sa_handler == SIG_IGN) continue;
    if (sigaction(signal, &action, nullptr) == 0) previous_.emplace_back(signal, old);
  }
}

StopSignals::~StopSignals() {
  for (auto it = previous_.rbegin(); it != previous_.rend(); ++it) {
    sigaction(it->first, &it->second, nullptr);
  }
  --alive;
}

int StopSignals::received() {
  return received_signal;
}

}  // namespace gradlab::train
