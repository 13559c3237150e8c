// Every row of the command table (cli/command_table.h) is a whole command: it prints its
// options with --help, has its section in docs/commands.md (summary and every flag) and a seed of
// the command-line fuzzer (fuzz/corpus/cli/<command>*), and a renamed flag's errors name the
// flag as the user typed it (checked through each row's parse entry, in this process). The tests
// loop over the rows: a new row is tested as it is added.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/command_table.h"
#include "tests/cli_runner.h"

namespace gradlab::cli {
namespace test_command_table {

namespace fs = std::filesystem;
using testing::run_gradlab;

const fs::path kSourceDir = fs::path(GRADLAB_TEST_FIXTURES_DIR).parent_path().parent_path();

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The section "## <name>" of docs/commands.md, up to the next "## ", or "".
std::string docs_section(const std::string& name) {
  const std::string docs = testing::read_text(kSourceDir / "docs" / "commands.md");
  const size_t start = docs.find("\n## " + name + "\n");
  if (start == std::string::npos) return "";
  const size_t end = docs.find("\n## ", start + 1);
  return docs.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

// The flags a row marks as an old name ("the old name of --target-exact-match"): old -> new.
std::vector<std::pair<std::string, std::string>> renamed_flags(const cli::Command& command) {
  std::vector<std::pair<std::string, std::string>> renamed;
  const std::string marker = "the old name of ";
  command.options([&](const boost::program_options::options_description& options) {
    for (const auto& option : options.options()) {
      if (option->description().starts_with(marker)) {
        renamed.emplace_back("--" + option->long_name(),
                             option->description().substr(marker.size()));
      }
    }
  });
  return renamed;
}

TEST(CommandTable, HoldsTheCommandsSortedByName) {
  const std::vector<cli::Command>& rows = cli::commands();
  ASSERT_GE(rows.size(), 14u);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_LT(rows[i - 1].name, rows[i].name);
  for (const cli::Command& row : rows) {
    EXPECT_EQ(cli::find_command(row.name), &row);
    EXPECT_FALSE(row.summary.empty()) << row.name;
    EXPECT_FALSE(contains(row.summary, "\n")) << row.name;
  }
  EXPECT_EQ(cli::find_command("no-such-command"), nullptr);
}

TEST(CommandTable, EveryCommandIsListedByHelp) {
  const auto help = run_gradlab({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.describe();
  for (const cli::Command& row : cli::commands()) {
    EXPECT_TRUE(contains(help.out, "  " + row.name + " ")) << row.name;
    EXPECT_TRUE(contains(help.out, row.summary)) << row.name;
  }
}

TEST(CommandTable, EveryCommandPrintsItsFlagsWithHelp) {
  for (const cli::Command& row : cli::commands()) {
    const auto help = run_gradlab({row.name, "--help"});
    EXPECT_EQ(help.exit_code, 0) << help.describe();
    EXPECT_TRUE(contains(help.out, "gradlab " + row.name + ": ")) << help.out;
    EXPECT_TRUE(contains(help.out, "Options:")) << help.out;
    const std::vector<std::string> flags = cli::flags_of(row);
    EXPECT_FALSE(flags.empty()) << row.name;
    for (const std::string& flag : flags) EXPECT_TRUE(contains(help.out, flag)) << row.name << flag;
    for (const std::string& flag : row.sizing_flags) {
      EXPECT_TRUE(contains(help.out, flag)) << row.name << " sizes with an unknown " << flag;
    }
  }
}

TEST(CommandTable, EveryCommandHasItsSectionInTheDocs) {
  for (const cli::Command& row : cli::commands()) {
    const std::string section = docs_section(row.name);
    ASSERT_FALSE(section.empty()) << "docs/commands.md has no section \"## " << row.name << "\"";
    EXPECT_TRUE(contains(section, row.summary)) << row.name << ": its summary";
    for (const std::string& flag : cli::flags_of(row)) {
      EXPECT_TRUE(contains(section, "`" + flag)) << row.name << ": " << flag;
    }
  }
}

TEST(CommandTable, EveryCommandHasAFuzzSeed) {
  for (const cli::Command& row : cli::commands()) {
    bool seeded = false;
    for (const auto& entry : fs::directory_iterator(kSourceDir / "fuzz" / "corpus" / "cli")) {
      const std::string name = entry.path().filename().string();
      if (name == row.name || name.starts_with(row.name + "-")) {
        seeded = seeded || testing::read_text(entry.path()).starts_with(row.name + "\n");
      }
    }
    EXPECT_TRUE(seeded) << "fuzz/corpus/cli has no seed of " << row.name;
  }
}

TEST(CommandTable, ARenamedFlagsErrorsNameTheFlagAsTyped) {
  int renamed_seen = 0;
  for (const cli::Command& row : cli::commands()) {
    const std::vector<std::string> flags = cli::flags_of(row);
    const bool has_out = std::find(flags.begin(), flags.end(), "--out") != flags.end();
    const bool has_config = std::find(flags.begin(), flags.end(), "--config") != flags.end();
    for (const auto& [old_flag, new_flag] : renamed_flags(row)) {
      ++renamed_seen;
      testing::TempDir dir;
      int refused = 0;
      for (const char* value : {"2", "-1", "1e300", "x"}) {
        std::vector<std::string> args = {row.name, old_flag, value};
        if (has_config) {  // the old name as a line of a --config file, on every other value
          std::ofstream(dir.file("old.ini")) << old_flag.substr(2) << " = " << value << "\n";
          if (value[0] == '-' || value[0] == 'x')
            args = {row.name, "--config", dir.file("old.ini")};
        }
        if (has_out) args.insert(args.end(), {"--out", dir.file("out")});
        const auto result = testing::parse_gradlab(args);
        if (result.exit_code != 2) continue;
        ++refused;
        EXPECT_TRUE(contains(result.err, old_flag.substr(2))) << result.describe();
        EXPECT_FALSE(contains(result.err.substr(0, result.err.find('\n')), new_flag))
            << result.describe();
      }
      EXPECT_GT(refused, 0) << row.name << " " << old_flag << ": no value was refused";
    }
  }
  EXPECT_GT(renamed_seen, 0) << "no renamed flag left to test: drop this test";
}

}  // namespace test_command_table
}  // namespace gradlab::cli
