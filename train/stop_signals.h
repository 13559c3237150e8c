// A clean stop on a signal: while a StopSignals is alive, the first of the signals it names sets
// a flag instead of ending the process, so that a training loop can finish its step and save; a
// second one has its default effect. A signal the process ignores stays ignored. train::fit uses
// it when LoopPolicy::stop_on_signal is set; the command line adds SIGHUP for a group.
#pragma once

#include <csignal>
#include <initializer_list>
#include <vector>

namespace gradlab::train {

class StopSignals {
 public:
  // Installs the handler for each signal (keeping the previous handlers). The flag is cleared
  // when no other StopSignals is alive: instances may nest and share it.
  explicit StopSignals(std::initializer_list<int> signals);
  // Puts the previous handlers back.
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The first stop signal received while any StopSignals was alive (0: none yet).
  static int received();

 private:
  std::vector<std::pair<int, struct sigaction>> previous_;
};

}  // namespace gradlab::train
