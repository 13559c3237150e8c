// The gradlab command-line tool: dispatches to one subcommand per job.
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <map>
#include <new>
#include <stdexcept>

#include "autograd/cpu.h"
#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/threads.h"
#include "cli/commands.h"
#include "cli/start_handshake.h"
#include "train/process_group.h"

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
      {"hooks", {run_hooks, "the hook points of a checkpoint's model, with their shapes"}},
      {"activations", {run_activations, "activations (and gradients) at hook points, to HDF5"}},
      {"ablate", {run_ablate, "held-out metrics with each head and ffn knocked out in turn"}},
      {"patch", {run_patch, "activation patching: a clean run's activations in a corrupted run"}},
      {"heads", {run_heads, "previous-token, duplicate-token and induction scores of every head"}},
      {"lens", {run_lens, "the logit lens: what each layer would predict, per position"}},
      {"inspect", {run_inspect, "configuration and parameter table of a checkpoint"}},
      {"sample", {run_sample, "generate text with a language model checkpoint"}},
      {"explain", {run_explain, "multi-head attention step by step, and its shape walk"}},
  };
  return table;
}

void print_usage(std::ostream& out) {
  out << "usage: gradlab <command> [options]   (gradlab <command> --help for its options;\n"
         "       gradlab --version for the version and the instructions it runs)\n\n"
         "commands:\n";
  for (const auto& [name, entry] : commands()) {
    out << "  " << name << std::string(12 - name.size(), ' ') << entry.second << '\n';
  }
}

// The version, and what this build runs on: the kernels' instruction set (chosen at run time)
// against this processor's, what the rest was compiled for, and whether it can train on several
// processes.
void print_version(std::ostream& out) {
  const auto requested = gradlab::requested_isa();
  out << "gradlab " << GRADLAB_VERSION << "\n"
      << "kernels: " << gradlab::isa_name(gradlab::kernel_isa()) << " ("
      << (requested ? "forced by GRADLAB_ISA=" + *requested : std::string("chosen at run time"))
      << "; this processor has " << gradlab::isa_name(gradlab::processor_isa()) << ")\n"
      << "other code compiled for: " << gradlab::compiled_isa() << "\n"
      << "several processes: "
      << (gradlab::train::built_with_mpi() ? "yes, under mpirun (MPI)" : "no (built without MPI)")
      << '\n';
}

// The flags whose values set how much memory a command needs.
const std::vector<std::string>& sizing_flags(const std::string& command) {
  static const std::vector<std::string> none;
  static const std::map<std::string, std::vector<std::string>> table{
      {"train",
       {"--batch-size", "--eval-size", "--length", "--symbols", "--context", "--eval-iters",
        "--modulus", "--train-fraction", "--d-model", "--d-ff", "--heads", "--layers", "--config",
        "--resume", "--data"}},
      {"eval", {"--checkpoint", "--data"}},
      {"predict", {"--checkpoint"}},
      {"attention", {"--checkpoint"}},
      {"hooks", {"--checkpoint"}},
      {"activations", {"--checkpoint", "--names"}},
      {"ablate", {"--checkpoint", "--data"}},
      {"patch", {"--checkpoint", "--names"}},
      {"heads", {"--checkpoint", "--sequences", "--length"}},
      {"lens", {"--checkpoint", "--top"}},
      {"sample", {"--checkpoint", "--tokens"}},
      {"inspect", {"--checkpoint"}},
      {"explain", {"--shapes"}},
  };
  const auto it = table.find(command);
  return it == table.end() ? none : it->second;
}

// The reason for an allocation that failed (std::bad_alloc, std::length_error): a size too large
// for this machine, named by the sizing flags given ("--batch-size 100000"), or by the flags
// that set the sizes when none was given. Said in words: "std::bad_alloc" tells a user nothing.
std::string out_of_memory(const std::string& command, const std::vector<std::string>& args) {
  std::string given;
  for (size_t i = 0; i < args.size(); ++i) {
    for (const std::string& flag : sizing_flags(command)) {
      std::string value;
      if (args[i] == flag && i + 1 < args.size()) {
        value = args[i + 1];
      } else if (args[i].starts_with(flag + "=")) {
        value = args[i].substr(flag.size() + 1);
      } else {
        continue;
      }
      given += (given.empty() ? "" : ", ") + flag + " " + gradlab::bounded(value);
    }
  }
  if (!given.empty()) {
    return "out of memory: the sizes given (" + given + ") need more memory than can be allocated";
  }
  std::string flags;
  for (const std::string& flag : sizing_flags(command)) flags += (flags.empty() ? "" : ", ") + flag;
  return "out of memory: the sizes of this run need more memory than can be allocated" +
         (flags.empty() ? std::string() : " (they are set by " + flags + ")");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gradlab::cli;
  using gradlab::train::world;
  // Before MPI starts: this may execute the program again.
  gradlab::make_idle_threads_sleep(argv);
  try {
    const std::string command = argc > 1 ? argv[1] : "";
    const StartDeadline deadline(command);
    gradlab::train::join_world(&argc, &argv);
    if (world().size() > 1) {
      if (const int code = check_same_command(command, GRADLAB_VERSION, world()); code >= 0) {
        return code;
      }
    }
    gradlab::kernel_isa();  // a bad GRADLAB_ISA stops every command here, before any work
  } catch (const std::exception& e) {
    std::cerr << "gradlab: " << e.what() << '\n';
    return kExitFailure;
  }
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
  if (name == "--version" || name == "version") {
    print_version(std::cout);
    return kExitOk;
  }
  const auto it = commands().find(name);
  if (it == commands().end()) {
    std::cerr << "gradlab: unknown command " << gradlab::quote(name) << "\n\n";
    print_usage(std::cerr);
    return kExitUsage;
  }
  if (world().size() > 1 && name != "train") {
    if (world().rank() == 0) {
      std::cerr << "gradlab " << name << ": runs in one process; of the commands, only train "
                << "runs on several (mpirun -np N gradlab train ...)\n";
    }
    return kExitUsage;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return it->second.first(args);
  } catch (const std::exception& e) {
    const bool allocation = dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                            dynamic_cast<const std::length_error*>(&e) != nullptr;
    // One write: under mpirun the other processes' and Open MPI's own messages may interleave
    // with this one between writes.
    const std::string line = message_prefix(name, world()) +
                             gradlab::one_line(allocation ? out_of_memory(name, args) : e.what()) +
                             "\n";
    std::cerr << line << std::flush;
    // The other processes would wait for this one in their next collective.
    if (world().size() > 1) world().abort(kExitFailure);
    return kExitFailure;
  }
}
