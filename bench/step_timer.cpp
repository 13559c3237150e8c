// gradlab_step_timer: the wall time of each training step of a config file's run, the step alone
// (no evaluation, no checkpoint, no log), for the full-batch grokking benchmark
// (scripts/bench_grokking.py, beside the PyTorch replica's steps timed the same way).
//
//   gradlab_step_timer CONFIG.ini STEPS THREADS   one JSON line: {"ms": [each step], ...}
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <variant>
#include <vector>

#include "autograd/cpu.h"
#include "autograd/error.h"
#include "train/config.h"
#include "train/trainer.h"

namespace {

using gradlab::train::RunConfig;

std::string trimmed(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

// The config file's "key = value" lines set the fields of the same keys; '#' starts a comment.
RunConfig read_config_file(const std::string& path) {
  RunConfig config;
  std::ifstream in(path);
  if (!in) throw gradlab::ConfigError("step_timer: cannot read " + path);
  std::vector<std::pair<std::string, std::string>> lines;
  for (std::string line; std::getline(in, line);) {
    line = trimmed(line.substr(0, line.find('#')));
    const size_t eq = line.find('=');
    if (eq != std::string::npos)
      lines.emplace_back(trimmed(line.substr(0, eq)), trimmed(line.substr(eq + 1)));
  }
  // The task first: it decides which task fields exist.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [key, value] : lines) {
      if ((pass == 0) != (key == "task")) continue;
      bool known = false;
      for (const gradlab::data::ConfigField& field : gradlab::train::config_fields(config)) {
        if (key != field.key) continue;
        known = true;
        std::visit(
            [&]<class T>(T* p) {
              if constexpr (std::is_same_v<T, std::string>) {
                *p = value;
              } else if constexpr (std::is_same_v<T, bool>) {
                *p = value == "1" || value == "true";
              } else if constexpr (std::is_same_v<T, double>) {
                *p = std::stod(value);
              } else {
                *p = static_cast<T>(std::stoll(value));
              }
            },
            field.value);
      }
      if (!known) throw gradlab::ConfigError("step_timer: unknown key '" + key + "' in " + path);
    }
  }
  return config;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: gradlab_step_timer CONFIG.ini STEPS THREADS\n";
    return 2;
  }
  try {
    RunConfig config = read_config_file(argv[1]);
    const int steps = std::stoi(argv[2]);
    config.threads = std::stoi(argv[3]);
    omp_set_num_threads(static_cast<int>(config.threads));
    gradlab::train::finalize(config);
    gradlab::train::Trainer trainer(config);
    // Wall time, and the CPU time of the process's threads: on a machine that other jobs share,
    // one thread's CPU time is the step's work whatever its wait for a core.
    const auto cpu_ms = [] {
      timespec t{};
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
      return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) * 1e-6;
    };
    std::vector<double> ms, cpu;
    double last_loss = 0;
    for (int i = 0; i < steps; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const double cpu_start = cpu_ms();
      last_loss = trainer.train_step().loss;
      cpu.push_back(cpu_ms() - cpu_start);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    std::printf(
        "{\"engine\": \"gradlab\", \"threads\": %d, \"isa\": \"%s\", \"loss\": %.6g, \"ms\": [",
        static_cast<int>(config.threads), gradlab::isa_name(gradlab::kernel_isa()).c_str(),
        last_loss);
    for (size_t i = 0; i < ms.size(); ++i) std::printf("%s%.3f", i ? ", " : "", ms[i]);
    std::printf("], \"cpu_ms\": [");
    for (size_t i = 0; i < cpu.size(); ++i) std::printf("%s%.3f", i ? ", " : "", cpu[i]);
    std::printf("]}\n");
  } catch (const std::exception& e) {
    std::cerr << "gradlab_step_timer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
