// Command-line parsing shared by the subcommands.
#include "cli/options.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <map>

#include "autograd/error.h"
#include "autograd/format.h"
#include "cli/commands.h"
#include "train/config.h"
#include "train/memory.h"

namespace gradlab::cli {

namespace po = boost::program_options;

namespace {

// The substitutions of a message are protected; a derived class may name them.
struct ErrorAccess : po::error_with_option_name {
  static std::map<std::string, std::string>& substitutions(po::error_with_option_name& e) {
    return e.*(&ErrorAccess::m_substitutions);
  }
};

// Gives the arguments that are not flags the names `positional` assigns them, in order; returns
// the first one it has no name for ("" if none). Done here rather than by Boost, which drops
// such arguments silently when no positional options are described, and otherwise refuses them
// without saying which.
std::string name_positional(po::parsed_options& parsed,
                            const po::positional_options_description* positional) {
  unsigned position = 0;
  for (po::option& o : parsed.options) {
    if (!o.string_key.empty()) continue;
    const std::string argument = o.original_tokens.empty() ? "" : o.original_tokens.front();
    if (!positional || position >= positional->max_total_count()) return argument;
    o.string_key = positional->name_for_position(position++);
  }
  return "";
}

// False for a number that reads as infinite or NaN ("inf", "nan", "1e999"); text that is no
// number at all is left to Boost, whose message says so.
bool finite_or_unreadable(const std::string& value) {
  char* end = nullptr;
  const double number = std::strtod(value.c_str(), &end);
  return end == value.c_str() || std::isfinite(number);
}

// "option '--e' is ambiguous: it matches --eps, --eval-every, --eval-full and 3 more": Boost's
// own message lists every alternative, 600 characters for `gradlab train ''`.
std::string ambiguous_message(const po::ambiguous_option& e) {
  const std::string given = e.get_option_name();
  if (given.empty() || given == "--" || given == "-") {
    return "unexpected argument " + quote(given) + " (an empty option name)";
  }
  constexpr size_t kShown = 4;
  const std::vector<std::string>& alternatives = e.alternatives();
  std::string shown;
  for (size_t i = 0; i < alternatives.size() && i < kShown; ++i) {
    shown += (i == 0 ? "--" : ", --") + alternatives[i];
  }
  if (alternatives.size() > kShown) {
    shown += " and " + std::to_string(alternatives.size() - kShown) + " more";
  }
  return "option " + quote(given) + " is ambiguous: it matches " + shown;
}

}  // namespace

std::string refused_value(const po::parsed_options& parsed, bool empty_allowed) {
  for (const po::option& o : parsed.options) {
    const po::option_description* description =
        parsed.description ? parsed.description->find_nothrow(o.string_key, false) : nullptr;
    if (!description) continue;
    const po::value_semantic* semantic = description->semantic().get();
    const std::string flag = "--" + description->long_name();
    for (const std::string& value : o.value) {
      if (!empty_allowed && value.empty() &&
          dynamic_cast<const po::typed_value<std::string>*>(semantic)) {
        return flag + " must not be empty";
      }
      if (dynamic_cast<const po::typed_value<double>*>(semantic) && !finite_or_unreadable(value)) {
        return flag + " must be a finite number, got " + quote(value);
      }
      const size_t first = value.find_first_not_of(" \t");
      if (first != std::string::npos && value[first] == '-' &&
          dynamic_cast<const po::typed_value<uint64_t>*>(semantic)) {
        return flag + " must not be negative, got " + quote(value);
      }
    }
  }
  return "";
}

std::string error_message(po::error& e) {
  if (const auto* ambiguous = dynamic_cast<const po::ambiguous_option*>(&e)) {
    return ambiguous_message(*ambiguous);
  }
  if (auto* with_name = dynamic_cast<po::error_with_option_name*>(&e)) {
    for (auto& [name, value] : ErrorAccess::substitutions(*with_name)) {
      std::replace(value.begin(), value.end(), '%', '?');
      value = bounded(value);
    }
  }
  return e.what();
}

void add_help_option(po::options_description& options) {
  options.add_options()("help,h", "show this help");
}

void add_checkpoint_option(po::options_description& options, std::string& path) {
  options.add_options()("checkpoint", po::value(&path)->required(), "checkpoint file (.h5)");
}

void add_threads_option(po::options_description& options, int64_t& threads) {
  options.add_options()("threads", po::value(&threads)->default_value(1), "OpenMP threads");
}

void add_max_memory_option(po::options_description& options, double& gib, const std::string& what) {
  options.add_options()(
      "max-memory", po::value(&gib)->default_value(0),
      ("GiB " + what + " may need, estimated first (0: 80% of this machine's memory)").c_str());
}

int parse_or_usage(const std::string& command, const std::vector<std::string>& args,
                   const po::options_description& options, po::variables_map& vm,
                   const po::positional_options_description* positional) {
  try {
    po::command_line_parser parser(args);
    parser.options(options);
    po::parsed_options parsed = parser.run();
    const std::string stray = name_positional(parsed, positional);
    po::store(parsed, vm);
    if (vm.count("help")) {
      std::cout << options << '\n';
      return kExitOk;
    }
    if (!stray.empty()) {
      return usage_error(
          command, "unexpected argument " + quote(stray) + " (not part of an option)", options);
    }
    if (const std::string reason = refused_value(parsed, false); !reason.empty()) {
      return usage_error(command, reason, options);
    }
    po::notify(vm);
  } catch (po::error& e) {
    return usage_error(command, error_message(e), options);
  }
  return -1;
}

std::string message_prefix(const std::string& command, const train::ProcessGroup& group) {
  const std::string rank = train::rank_label(group);
  return "gradlab " + command + (rank.empty() ? "" : " (" + rank + ")") + ": ";
}

int usage_error(const std::string& command, const std::string& reason,
                const po::options_description& options) {
  std::cerr << "gradlab " << command << ": " << one_line(reason) << "\n\n" << options << '\n';
  return kExitUsage;
}

int check_threads(const std::string& command, int64_t threads,
                  const po::options_description& options) {
  try {
    train::check_threads(threads);
  } catch (const ConfigError& e) {
    return usage_error(command, e.what(), options);
  }
  return -1;
}

int check_max_memory(const std::string& command, double max_memory_gib,
                     const po::options_description& options) {
  if (!(max_memory_gib >= 0) || !std::isfinite(max_memory_gib)) {
    return usage_error(command, "--max-memory must be a number of GiB >= 0", options);
  }
  return -1;
}

int refuse_above_memory_limit(const std::string& command, double max_memory_gib, double bytes,
                              const std::string& what, const std::string& remedy,
                              const po::options_description& options) {
  const double limit = train::memory_limit(max_memory_gib);
  if (bytes <= limit) return -1;
  return usage_error(
      command,
      what + " needs about " + train::gib(bytes) + ", above the limit of " + train::gib(limit) +
          (max_memory_gib > 0 ? " (--max-memory)" : " (80% of this machine's memory)") + remedy,
      options);
}

std::optional<std::string> special_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0 || S_ISREG(info.st_mode)) return std::nullopt;
  if (S_ISDIR(info.st_mode)) return "a directory";
  if (S_ISFIFO(info.st_mode)) return "a FIFO";
  if (S_ISCHR(info.st_mode)) return "a character device";
  if (S_ISBLK(info.st_mode)) return "a block device";
  if (S_ISSOCK(info.st_mode)) return "a socket";
  return "a special file";
}

int check_input_file(const std::string& command, const std::string& flag, const std::string& path,
                     const po::options_description& options) {
  if (path.empty()) return -1;
  if (const std::optional<std::string> kind = special_file(path)) {
    return usage_error(command, flag + " " + path + ": not a regular file (" + *kind + ")",
                       options);
  }
  return -1;
}

void require_checkpoint_file(const std::string& path) {
  const std::optional<std::string> kind = special_file(path);
  if (kind && *kind != "a directory") {
    throw CheckpointError(path + ": not a regular file (" + *kind + ")");
  }
}

}  // namespace gradlab::cli
