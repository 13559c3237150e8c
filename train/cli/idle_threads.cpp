#include "train/cli/idle_threads.h"

#include <unistd.h>

#include <cstdlib>

namespace gradlab::cli {

void make_idle_threads_sleep(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0) != 0) return;
  setenv("GOMP_SPINCOUNT", kIdleSpinCount, /*overwrite=*/0);
  execv("/proc/self/exe", argv);
  // Still here: no re-execution (no /proc, say). The setting is harmless for children.
}

}  // namespace gradlab::cli
