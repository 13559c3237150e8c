// The gradlab command-line tool: dispatches to one subcommand per job.
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <map>

#include "autograd/error.h"
#include "autograd/format.h"
#include "train/cli/commands.h"
#include "train/cli/idle_threads.h"

namespace {

using Command = std::function<int(const std::vector<std::string>&)>;

const std::map<std::string, std::pair<Command, const char*>>& commands() {
  using namespace gradlab::cli;
  static const std::map<std::string, std::pair<Command, const char*>> table{
      {"gradcheck", {run_gradcheck, "check every op's gradient against central differences"}},
      {"train", {run_train, "train a transformer on a toy task or a text file (the main job)"}},
      {"eval", {run_eval, "metrics of a checkpoint on the held-out set"}},
      {"predict", {run_predict, "greedy decoding of one prompt with a checkpoint"}},
      {"attention", {run_attention, "attention weights of every layer and head, to HDF5"}},
      {"inspect", {run_inspect, "configuration and parameter table of a checkpoint"}},
      {"sample", {run_sample, "generate text with a language model checkpoint"}},
      {"explain", {run_explain, "multi-head attention step by step, and its shape walk"}},
  };
  return table;
}

void print_usage(std::ostream& out) {
  out << "usage: gradlab <command> [options]   (gradlab <command> --help for its options)\n\n"
         "commands:\n";
  for (const auto& [name, entry] : commands()) {
    out << "  " << name << std::string(12 - name.size(), ' ') << entry.second << '\n';
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gradlab::cli;
  make_idle_threads_sleep(argv);
  if (argc < 2) {
    std::cerr << "gradlab: no command given\n\n";
    print_usage(std::cerr);
    return kExitUsage;
  }
  const std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    print_usage(std::cout);
    return kExitOk;
  }
  const auto it = commands().find(name);
  if (it == commands().end()) {
    std::cerr << "gradlab: unknown command " << gradlab::quote(name) << "\n\n";
    print_usage(std::cerr);
    return kExitUsage;
  }
  try {
    return it->second.first(std::vector<std::string>(argv + 2, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "gradlab " << name << ": " << e.what() << '\n';
    return kExitFailure;
  }
}
