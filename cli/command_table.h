// The table of gradlab's commands: a row per command, each registered by its own file
// (cli/cmd_<name>.cpp). The dispatch, `gradlab --help`, the out-of-memory message's flags, the
// command-line fuzzer (its commands and dictionary) and the tests of every command read it.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <string>
#include <vector>

namespace gradlab::cli {

using Arguments = std::vector<std::string>;
using OptionsReader = std::function<void(const boost::program_options::options_description&)>;

struct Command {
  std::string name;
  std::string summary;  // one line: `gradlab --help` and docs/commands.md show it
  // The flags whose values set how much memory the command needs (named when it runs out).
  std::vector<std::string> sizing_flags;
  // Hands the command's options, as --help prints them, to a reader; they are bound to
  // variables that live only during the call.
  std::function<void(const OptionsReader&)> options;
  // The arguments after the name -> the process exit code: 0 success, 1 runtime failure, 2 usage
  // error (after printing the reason and the usage).
  std::function<int(const Arguments&)> run;
  // The same arguments parsed and validated exactly as run does before it starts its work, and
  // no further (for the command-line fuzzer): returns the code run returns at that point, 0
  // after --help or 2 after a usage error, or -1 when it would go on. Nothing is trained, loaded,
  // written or printed to stdout except --help; train's reads a --config file and a --resume
  // checkpoint's configuration and step, as its run does while parsing. A --checkpoint or
  // --resume that names a special file (a FIFO, a device) throws CheckpointError, as a bad
  // --resume checkpoint does: run lets it reach main, which exits 1.
  std::function<int(const Arguments&)> parse;
};

// Every command, sorted by name.
const std::vector<Command>& commands();

// The row named name, or nullptr.
const Command* find_command(const std::string& name);

// The row of a command whose arguments are an Args: Args() declares its options in a member
// `options` (bound to its other members), parse(args, a) reads and checks them (-1 to go on, or
// an exit code), run(a) does the work.
template <class Args>
Command command_row(std::string name, std::string summary, std::vector<std::string> sizing_flags,
                    int (*parse)(const Arguments&, Args&), int (*run)(Args&)) {
  return {std::move(name),
          std::move(summary),
          std::move(sizing_flags),
          [](const OptionsReader& read) {
            const Args a;
            read(a.options);
          },
          [parse, run](const Arguments& args) {
            Args a;
            if (const int code = parse(args, a); code >= 0) return code;
            return run(a);
          },
          [parse](const Arguments& args) {
            Args a;
            return parse(args, a);
          }};
}

// Adds a row to the table: a command's file holds one, at namespace scope, either a Command or
// what command_row takes.
struct CommandRow {
  explicit CommandRow(Command row);
  template <class Args>
  CommandRow(std::string name, std::string summary, std::vector<std::string> sizing_flags,
             int (*parse)(const Arguments&, Args&), int (*run)(Args&))
      : CommandRow(command_row(std::move(name), std::move(summary), std::move(sizing_flags), parse,
                               run)) {}
};

// The long names of a command's flags, in the order --help shows them ("--checkpoint").
std::vector<std::string> flags_of(const Command& command);

}  // namespace gradlab::cli
