// Prints the libFuzzer dictionary words of fuzz_cli that come from the command table: every
// command's name and every flag, each alone and as a whole argument word ("\n--steps\n").
// scripts/fuzz.sh puts them before fuzz/cli.dict's values (file names, numbers, task names).
#include <cstdio>
#include <set>
#include <string>

#include "cli/command_table.h"

namespace {

void print_word(const std::string& word) {
  std::printf("\"%s\"\n\"\\x0a%s\\x0a\"\n", word.c_str(), word.c_str());
}

}  // namespace

int main() {
  std::printf("# The commands and flags of gradlab's command table (fuzz/cli_dictionary.cpp).\n");
  std::set<std::string> flags{"-h"};
  for (const gradlab::cli::Command& command : gradlab::cli::commands()) {
    print_word(command.name);
    for (const std::string& flag : gradlab::cli::flags_of(command)) flags.insert(flag);
  }
  for (const std::string& flag : flags) print_word(flag);
  return 0;
}
