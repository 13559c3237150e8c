// Command-line parsing shared by the subcommands.
#include "train/options.h"

#include <iostream>

#include "train/commands.h"

namespace gradlab::train {

namespace po = boost::program_options;

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
  } catch (const po::error& e) {
    return usage_error(command, e.what(), options);
  }
  return -1;
}

int usage_error(const std::string& command, const std::string& reason,
                const po::options_description& options) {
  std::cerr << "gradlab " << command << ": " << reason << "\n\n" << options << '\n';
  return kExitUsage;
}

}  // namespace gradlab::train
