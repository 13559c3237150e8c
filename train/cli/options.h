// Shared command-line parsing for the subcommands (Boost.Program_options).
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace gradlab::cli {

// Parses args into vm and notifies. Returns -1 to continue, or an exit code: 0 after printing
// --help, 2 after printing a one-line reason and the usage for a bad flag or value.
int parse_or_usage(
    const std::string& command, const std::vector<std::string>& args,
    const boost::program_options::options_description& options,
    boost::program_options::variables_map& vm,
    const boost::program_options::positional_options_description* positional = nullptr);

// e.what() for an error of Boost.Program_options. Boost 1.74 replaces each placeholder of a
// message (%value%, %original_token%, ...) until none is left, so an argument that contains one
// itself (`--steps %value%`) made what() loop forever; here every '%' in the arguments quoted by
// the message is shown as '?' instead, and each is shortened as bounded() does (which changes
// e).
std::string error_message(boost::program_options::error& e);

// Prints "gradlab <command>: <reason>" and the usage to stderr; returns 2.
int usage_error(const std::string& command, const std::string& reason,
                const boost::program_options::options_description& options);

// --threads within [1, train::max_threads()]: returns -1, or 2 after the usage error.
int check_threads(const std::string& command, int64_t threads,
                  const boost::program_options::options_description& options);

}  // namespace gradlab::cli
