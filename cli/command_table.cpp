// The command table's storage: rows arrive from the commands' files while the program starts.
#include "cli/command_table.h"

#include <algorithm>

namespace gradlab::cli {
namespace {

std::vector<Command>& rows() {
  static std::vector<Command> table;
  return table;
}

}  // namespace

CommandRow::CommandRow(Command row) {
  std::vector<Command>& table = rows();
  const auto at =
      std::lower_bound(table.begin(), table.end(), row.name,
                       [](const Command& c, const std::string& n) { return c.name < n; });
  table.insert(at, std::move(row));
}

const std::vector<Command>& commands() {
  return rows();
}

const Command* find_command(const std::string& name) {
  for (const Command& command : rows()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

std::vector<std::string> flags_of(const Command& command) {
  std::vector<std::string> flags;
  command.options([&](const boost::program_options::options_description& options) {
    for (const auto& option : options.options()) flags.push_back("--" + option->long_name());
  });
  return flags;
}

}  // namespace gradlab::cli
