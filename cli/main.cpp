// The gradlab command-line tool: dispatches to one subcommand per job.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>
#include <stdexcept>

#include "autograd/cpu.h"
#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/threads.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/start_handshake.h"
#include "train/process_group.h"

namespace {

void print_usage(std::ostream& out) {
  out << "usage: gradlab <command> [options]   (gradlab <command> --help for its options;\n"
         "       gradlab --version for the version and the instructions it runs)\n\n"
         "commands:\n";
  // The summaries line up two spaces after the longest name.
  size_t width = 0;
  for (const gradlab::cli::Command& command : gradlab::cli::commands()) {
    width = std::max(width, command.name.size() + 2);
  }
  for (const gradlab::cli::Command& command : gradlab::cli::commands()) {
    out << "  " << command.name << std::string(width - command.name.size(), ' ') << command.summary
        << '\n';
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

// The reason for an allocation that failed (std::bad_alloc, std::length_error): a size too large
// for this machine, named by the sizing flags given ("--batch-size 100000"), or by the flags
// that set the sizes when none was given. Said in words: "std::bad_alloc" tells a user nothing.
std::string out_of_memory(const gradlab::cli::Command& command,
                          const std::vector<std::string>& args) {
  std::string given;
  for (size_t i = 0; i < args.size(); ++i) {
    for (const std::string& flag : command.sizing_flags) {
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
  for (const std::string& flag : command.sizing_flags) flags += (flags.empty() ? "" : ", ") + flag;
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
  const Command* const command = find_command(name);
  if (!command) {
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
    return command->run(args);
  } catch (const std::exception& e) {
    const bool allocation = dynamic_cast<const std::bad_alloc*>(&e) != nullptr ||
                            dynamic_cast<const std::length_error*>(&e) != nullptr;
    // One write: under mpirun the other processes' and Open MPI's own messages may interleave
    // with this one between writes.
    const std::string line =
        message_prefix(name, world()) +
        gradlab::one_line(allocation ? out_of_memory(*command, args) : e.what()) + "\n";
    std::cerr << line << std::flush;
    // The other processes would wait for this one in their next collective.
    if (world().size() > 1) world().abort(kExitFailure);
    return kExitFailure;
  }
}
