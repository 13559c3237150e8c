// gradlab_allreduce_bench: the time of one gradient sum across the processes of an mpirun job
// (ProcessGroup::sum on float32, the call train::Trainer makes), for buffers of 4 KiB to 64 MiB.
// Run under mpirun; rank 0 prints one JSON object per size:
//   {"processes": 2, "bytes": 4096, "seconds": 1.2e-05}
// with the median of the repetitions (each one a barrier-like small sum, then the timed sum).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "autograd/threads.h"
#include "train/process_group.h"

int main(int argc, char** argv) {
  gradlab::make_idle_threads_sleep(argv);
  gradlab::train::join_world(&argc, &argv);
  gradlab::train::ProcessGroup& group = gradlab::train::world();
  for (size_t bytes = size_t{1} << 12; bytes <= size_t{1} << 26; bytes <<= 1) {
    std::vector<float> values(bytes / sizeof(float), 1.0f);
    const int repetitions = bytes <= (size_t{1} << 20) ? 200 : 20;
    std::vector<double> seconds;
    for (int r = 0; r < repetitions + 2; ++r) {
      group.any(false);  // line the processes up, so that no one times the others' lateness
      const auto start = std::chrono::steady_clock::now();
      group.sum(values);
      const double elapsed =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (r >= 2) seconds.push_back(elapsed);  // the first two warm the buffers up
    }
    std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
    if (group.rank() == 0) {
      std::printf("{\"processes\": %d, \"bytes\": %zu, \"seconds\": %.6g}\n", group.size(), bytes,
                  seconds[seconds.size() / 2]);
    }
  }
  return 0;
}
