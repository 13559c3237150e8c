// Command-line parsing shared by the subcommands.
#include "train/cli/options.h"

#include <algorithm>
#include <iostream>
#include <map>

#include "autograd/error.h"
#include "autograd/format.h"
#include "train/cli/commands.h"
#include "train/config.h"

namespace gradlab::cli {

namespace po = boost::program_options;

namespace {

// The substitutions of a message are protected; a derived class may name them.
struct ErrorAccess : po::error_with_option_name {
  static std::map<std::string, std::string>& substitutions(po::error_with_option_name& e) {
    return e.*(&ErrorAccess::m_substitutions);
  }
};

}  // namespace

std::string error_message(po::error& e) {
  if (auto* with_name = dynamic_cast<po::error_with_option_name*>(&e)) {
    for (auto& [name, value] : ErrorAccess::substitutions(*with_name)) {
      std::replace(value.begin(), value.end(), '%', '?');
      value = bounded(value);
    }
  }
  return e.what();
}

int parse_or_usage(const std::string& command, const std::vector<std::string>& args,
                   const po::options_description& options, po::variables_map& vm,
                   const po::positional_options_description* positional) {
  try {
    po::command_line_parser parser(args);
    parser.options(options);
    if (positional) parser.positional(*positional);
    po::store(parser.run(), vm);
    if (vm.count("help")) {
      std::cout << options << '\n';
      return kExitOk;
    }
    po::notify(vm);
  } catch (po::error& e) {
    return usage_error(command, error_message(e), options);
  }
  return -1;
}

int usage_error(const std::string& command, const std::string& reason,
                const po::options_description& options) {
  std::cerr << "gradlab " << command << ": " << reason << "\n\n" << options << '\n';
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

}  // namespace gradlab::cli
