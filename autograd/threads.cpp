// The thread count and the idle threads' wait policy (threads.h).
#include "autograd/threads.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

namespace gradlab {

void set_threads(int count) {
  omp_set_num_threads(std::max(count, 1));
}

int threads() {
  return omp_get_max_threads();
}

void make_idle_threads_sleep(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0) != 0) return;
  setenv("GOMP_SPINCOUNT", kIdleSpinCount, /*overwrite=*/0);
  execv("/proc/self/exe", argv);
  // Still here: no re-execution (no /proc, say). The setting is harmless for children.
}

}  // namespace gradlab

// The one-thread default, set before main() so that the program's own choice (set_threads,
// omp_set_num_threads) comes after it. The library's CMake target asks the linker for this
// symbol, so that the default holds in every program linked with gradlab, even one that never
// refers to this file.
extern "C" {
int gradlab_thread_default = [] {
  if (std::getenv("OMP_NUM_THREADS") == nullptr) omp_set_num_threads(1);
  return 1;
}();
}
