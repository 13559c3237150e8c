// main() of gradlab_bench: Google Benchmark's flags plus --threads=N (default 1), the OpenMP
// thread count of every kernel, set before anything runs. Idle threads sleep, as in gradlab.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <exception>
#include <iostream>
#include <string>

#include "autograd/threads.h"
#include "bench/bench_shared.h"

int main(int argc, char** argv) {
  gradlab::make_idle_threads_sleep(argv);  // as the gradlab tool does
  int threads = 1;
  try {
    threads = gradlab_bench::take_threads_flag(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gradlab_bench: " << e.what() << '\n';
    return 2;
  }
  omp_set_num_threads(threads);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("engine", "gradlab");
  benchmark::AddCustomContext("threads", std::to_string(threads));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
