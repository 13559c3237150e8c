// The docs against the tree: every repository path a doc names exists, and the table of
// docs/checkpoint-format.md lists every /config attribute a checkpoint stores, for every task,
// and nothing else. A path is what a user would type or open: a link's target, or a word of
// inline or fenced code that starts with a directory of the repository or ends like a source file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data/tasks.h"
#include "train/config.h"

namespace gradlab {
namespace test_docs {

namespace fs = std::filesystem;

// The source tree: tests/fixtures/ is two levels below it.
const fs::path kRoot = fs::path(GRADLAB_TEST_FIXTURES_DIR).parent_path().parent_path();

// A bare file name with one of these endings names a file of the repository (`trainer.cpp`);
// other endings (.h5, .csv, .ini, .txt) are as often what a command writes (`config.ini`).
const std::vector<std::string> kSourceEndings = {".h", ".cpp", ".py", ".sh", ".md", ".cmake"};

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

bool starts_with(const std::string& text, const std::string& start) {
  return text.rfind(start, 0) == 0;
}

// Whether text matches pattern, where '*' stands for any run of characters.
bool wildcard(const std::string& pattern, const std::string& text) {
  size_t p = 0, t = 0, star = std::string::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// What the repository holds: its paths, without what .gitignore's directory patterns name
// (build/, runs/: where gradlab and its build write) and hidden entries.
struct Repository {
  std::vector<std::string> ignored;  // directory patterns of .gitignore, without the '/'
  std::set<std::string> top_dirs;    // autograd, docs, nn, ...
  std::vector<std::string> paths;    // files and directories, relative, '/'-separated

  bool is_ignored(const std::string& name) const {
    return std::any_of(ignored.begin(), ignored.end(),
                       [&](const std::string& pattern) { return wildcard(pattern, name); });
  }
};

Repository load_repository(const fs::path& root) {
  Repository repo;
  std::istringstream gitignore(read_text(root / ".gitignore"));
  for (std::string line; std::getline(gitignore, line);) {
    if (ends_with(line, "/")) repo.ignored.push_back(line.substr(0, line.size() - 1));
  }
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string name = it->path().filename().string();
    if (starts_with(name, ".") || (it->is_directory() && repo.is_ignored(name))) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    const std::string relative = it->path().lexically_relative(root).generic_string();
    repo.paths.push_back(relative);
    if (it.depth() == 0 && it->is_directory()) repo.top_dirs.insert(name);
  }
  return repo;
}

// A path a doc names, as a pattern ('*' for a placeholder such as <task>): from the repository's
// root, or, with `anywhere`, the end of some path in it (`kernels/gelu.h`, `trainer.cpp`).
struct Reference {
  std::string pattern;
  bool anywhere = false;
};

// The repository path a word of code names, if it names one. Absolute paths (the machine's),
// URLs and paths under an ignored directory (build/..., runs/...: outputs) name none; nor do
// words that neither start with a directory of the repository nor end like a source file
// (FILE.h5, 1/sqrt).
std::optional<Reference> repository_reference(const Repository& repo, std::string word) {
  while (!word.empty() && std::string(".,:;").find(word.back()) != std::string::npos) {
    word.pop_back();
  }
  if (starts_with(word, "<gradlab/") && ends_with(word, ">")) {  // an installed header
    word = word.substr(9, word.size() - 10);
  }
  word = std::regex_replace(word, std::regex("<[^<>]*>"), "*");
  if (starts_with(word, "./")) word = word.substr(2);
  if (word.empty() || starts_with(word, "/") || starts_with(word, "~") ||
      word.find("://") != std::string::npos || word.find_first_of("<>") != std::string::npos) {
    return std::nullopt;
  }
  const size_t slash = word.find('/');
  if (slash != std::string::npos) {
    const std::string first = word.substr(0, slash);
    if (repo.is_ignored(first)) return std::nullopt;
    if (repo.top_dirs.count(first)) {
      while (ends_with(word, "/")) word.pop_back();
      return Reference{word, false};
    }
  }
  for (const std::string& ending : kSourceEndings) {
    if (ends_with(word, ending) && word.size() > ending.size()) return Reference{word, true};
  }
  return std::nullopt;
}

bool exists(const Repository& repo, const Reference& ref) {
  if (ref.pattern.find('*') == std::string::npos && !ref.anywhere) {
    return std::find(repo.paths.begin(), repo.paths.end(), ref.pattern) != repo.paths.end();
  }
  return std::any_of(repo.paths.begin(), repo.paths.end(), [&](const std::string& path) {
    return wildcard(ref.pattern, path) || (ref.anywhere && wildcard("*/" + ref.pattern, path));
  });
}

// The words of a doc's code: fenced blocks and inline spans.
std::vector<std::string> code_words(const std::string& doc) {
  std::string code;
  std::istringstream lines(doc);
  bool fenced = false;
  for (std::string line; std::getline(lines, line);) {
    const size_t indent = line.find_first_not_of(' ');
    if (indent != std::string::npos && line.compare(indent, 3, "```") == 0) {
      fenced = !fenced;
      continue;
    }
    if (fenced) {
      code += line + "\n";
      continue;
    }
    static const std::regex span("`([^`]+)`");
    for (auto it = std::sregex_iterator(line.begin(), line.end(), span);
         it != std::sregex_iterator(); ++it) {
      code += (*it)[1].str() + "\n";
    }
  }
  // Maximal runs of these characters, scanned by hand: std::regex over the whole of the docs'
  // code took 10 s in the unoptimised sanitizer build.
  const auto in_word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           (c != '\0' && std::strchr("_.*<>+~/-", c) != nullptr);
  };
  std::vector<std::string> words;
  for (size_t start = 0; start < code.size();) {
    if (!in_word(code[start])) {
      ++start;
      continue;
    }
    size_t end = start;
    while (end < code.size() && in_word(code[end])) ++end;
    words.push_back(code.substr(start, end - start));
    start = end;
  }
  return words;
}

// The targets of a doc's links and images that are files of its own tree: no URL, no anchor.
std::vector<std::string> link_targets(const std::string& doc) {
  static const std::regex link("\\]\\(([^)\\s]+)\\)");
  std::vector<std::string> targets;
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), link); it != std::sregex_iterator();
       ++it) {
    std::string target = (*it)[1].str();
    target = target.substr(0, target.find('#'));
    if (target.empty() || target.find(':') != std::string::npos) continue;
    targets.push_back(target);
  }
  return targets;
}

// Every path doc names that the repository lacks, as "doc: path" lines.
std::vector<std::string> missing_paths(const Repository& repo, const fs::path& root,
                                       const std::string& doc_path, const std::string& doc) {
  std::vector<std::string> missing;
  std::set<std::string> checked;
  for (const std::string& word : code_words(doc)) {
    if (!checked.insert(word).second) continue;
    const std::optional<Reference> ref = repository_reference(repo, word);
    if (ref && !exists(repo, *ref)) missing.push_back(doc_path + ": `" + word + "`");
  }
  const fs::path doc_dir = fs::path(doc_path).parent_path();
  for (const std::string& target : link_targets(doc)) {
    if (!fs::exists(root / doc_dir / target)) missing.push_back(doc_path + ": (" + target + ")");
  }
  return missing;
}

// The user docs: the root's and docs/ Markdown files, and every README of the tree.
std::vector<std::string> user_docs(const Repository& repo) {
  std::vector<std::string> docs;
  for (const std::string& path : repo.paths) {
    const bool markdown = ends_with(path, ".md");
    const bool top = markdown && path.find('/') == std::string::npos;
    const bool in_docs =
        markdown && starts_with(path, "docs/") && path.find('/', 5) == std::string::npos;
    const bool readme = starts_with(fs::path(path).filename().string(), "README");
    if (top || in_docs || readme) docs.push_back(path);
  }
  return docs;
}

TEST(DocsPaths, RuleFindsRepositoryPathsAndSkipsOutputs) {
  const Repository repo = load_repository(kRoot);
  const std::string doc =
      "Run `./scripts/run.sh`, then `build/gradlab train --out runs/x --config configs/copy.ini`;\n"
      "see [the model](docs/model.md#top), `train/cli/options.cpp`, `distributed_step.cpp`,\n"
      "`<gradlab/nn/attention.h>`, `docs/missing-<name>.md` and `--out F.h5` under `/tmp/x.py`.\n"
      "```sh\nscripts/no_such_script.py runs/default/best.h5\n```\n[gone](no-such-doc.md)\n";
  const std::vector<std::string> missing = missing_paths(repo, kRoot, "X.md", doc);
  const std::vector<std::string> expected = {
      "X.md: `train/cli/options.cpp`", "X.md: `distributed_step.cpp`",
      "X.md: `docs/missing-<name>.md`", "X.md: `scripts/no_such_script.py`",
      "X.md: (no-such-doc.md)"};
  EXPECT_EQ(missing, expected);
}

TEST(DocsPaths, EveryPathADocNamesExists) {
  const Repository repo = load_repository(kRoot);
  const std::vector<std::string> docs = user_docs(repo);
  ASSERT_TRUE(std::find(docs.begin(), docs.end(), "README.md") != docs.end());
  ASSERT_TRUE(std::find(docs.begin(), docs.end(), "docs/checkpoint-format.md") != docs.end());
  std::string report;
  for (const std::string& doc : docs) {
    for (const std::string& line : missing_paths(repo, kRoot, doc, read_text(kRoot / doc))) {
      report += "\n  " + line;
    }
  }
  EXPECT_TRUE(report.empty()) << "paths the docs name that the repository does not hold:" << report;
}

// The attribute names of the first column of the table in docs/checkpoint-format.md's section
// "The `/config` attributes" (`beta1`, `beta2`, `eps` share a row).
std::set<std::string> documented_config_names() {
  std::istringstream lines(read_text(kRoot / "docs/checkpoint-format.md"));
  std::set<std::string> names;
  bool in_section = false;
  for (std::string line; std::getline(lines, line);) {
    if (starts_with(line, "## ")) in_section = starts_with(line, "## The `/config` attributes");
    if (!in_section || !starts_with(line, "| `")) continue;
    const std::string cell = line.substr(1, line.find('|', 1) - 1);
    static const std::regex name("`([^`]+)`");
    for (auto it = std::sregex_iterator(cell.begin(), cell.end(), name);
         it != std::sregex_iterator(); ++it) {
      names.insert((*it)[1].str());
    }
  }
  return names;
}

// The /config attribute names a checkpoint of each task stores, and the tasks that store each.
std::map<std::string, std::string> stored_config_names() {
  std::map<std::string, std::string> tasks_of;
  for (const data::TaskKind& kind : data::task_kinds()) {
    train::RunConfig config;
    config.task.name = kind.name;
    for (const train::ConfigEntry& entry : train::to_entries(config)) {
      std::string& tasks = tasks_of[entry.first];
      tasks += (tasks.empty() ? "" : ", ") + std::string(kind.name);
    }
  }
  return tasks_of;
}

TEST(DocsCheckpointFormat, ConfigTableNamesEveryStoredAttribute) {
  const std::set<std::string> documented = documented_config_names();
  ASSERT_TRUE(documented.count("d-model")) << "the table of /config attributes was not found";
  std::string missing;
  for (const auto& [name, tasks] : stored_config_names()) {
    if (!documented.count(name)) missing += "\n  " + name + " (task " + tasks + ")";
  }
  EXPECT_TRUE(missing.empty())
      << "/config attributes missing from docs/checkpoint-format.md's table:" << missing;
}

TEST(DocsCheckpointFormat, ConfigTableNamesNothingElse) {
  const std::map<std::string, std::string> stored = stored_config_names();
  std::string extra;
  for (const std::string& name : documented_config_names()) {
    if (!stored.count(name)) extra += "\n  " + name;
  }
  EXPECT_TRUE(extra.empty())
      << "docs/checkpoint-format.md's table names attributes no checkpoint stores:" << extra;
}

}  // namespace test_docs
}  // namespace gradlab
