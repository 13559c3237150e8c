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
  action.sa_flags = SA_RESTART;
  for (const int signal : signals) {
    struct sigaction old {};
    if (sigaction(signal, &action, &old) == 0) previous_.emplace_back(signal, old);
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
