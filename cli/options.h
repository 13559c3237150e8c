// Shared command-line parsing for the subcommands (Boost.Program_options), and the checks every
// command applies to what it is given.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gradlab::cli {

// The option groups commands share, each written once: --help; --checkpoint FILE (required);
// --threads N (OpenMP threads, default 1); --max-memory GiB (default 0: 80% of this machine's
// memory), with what names what the estimate covers ("the cache").
void add_help_option(boost::program_options::options_description& options);
void add_checkpoint_option(boost::program_options::options_description& options, std::string& path);
void add_threads_option(boost::program_options::options_description& options, int64_t& threads);
void add_max_memory_option(boost::program_options::options_description& options, double& gib,
                           const std::string& what);

// Parses args into vm and notifies. Returns -1 to continue, or an exit code: 0 after printing
// --help, 2 after printing a one-line reason and the usage for a bad flag or value. Besides
// Boost's own checks, it refuses what Boost would accept silently: an argument that is not a
// flag (unless `positional` names it), an empty value for a text option (a path, a name), a
// negative number for an unsigned option and a non-finite one for a floating-point option (see
// refused_value).
int parse_or_usage(
    const std::string& command, const std::vector<std::string>& args,
    const boost::program_options::options_description& options,
    boost::program_options::variables_map& vm,
    const boost::program_options::positional_options_description* positional = nullptr);

// The reason to refuse a parsed value that Boost accepts, or "": an infinite or NaN number for a
// floating-point option (every command's: no setting is meant to be one, and a range check
// such as x >= 0 lets inf through), a negative number for an unsigned option (Boost reads "-1"
// as 2^64 - 1), or, unless empty_allowed, an empty value for a text option (`--out ""` would
// mean the default). A config file written by gradlab keeps
// empty values (`data = ` for a toy task), so it is read with empty_allowed.
std::string refused_value(const boost::program_options::parsed_options& parsed, bool empty_allowed);

// e.what() for an error of Boost.Program_options. Boost 1.74 replaces each placeholder of a
// message (%value%, %original_token%, ...) until none is left, so an argument that contains one
// itself (`--steps %value%`) made what() loop forever; here every '%' in the arguments quoted by
// the message is shown as '?' instead, and each is shortened as bounded() does (which changes
// e). An ambiguous option names its first few matches, not all of them.
std::string error_message(boost::program_options::error& e);

// Prints "gradlab <command>: <reason>" and the usage to stderr; returns 2. The reason is printed
// on one line whatever it quotes (one_line in autograd/format.h), as main prints a failure's.
int usage_error(const std::string& command, const std::string& reason,
                const boost::program_options::options_description& options);

// --threads within [1, train::max_threads()]: returns -1, or 2 after the usage error.
int check_threads(const std::string& command, int64_t threads,
                  const boost::program_options::options_description& options);

// --max-memory, GiB >= 0: returns -1, or 2 after the usage error.
int check_max_memory(const std::string& command, double max_memory_gib,
                     const boost::program_options::options_description& options);

// Refuses work estimated to need `bytes` above --max-memory's limit (train::memory_limit):
// returns -1 when it fits, or 2 after the usage error "<what> needs about X GiB, above the limit
// of Y GiB (--max-memory)<remedy>", where what names the flags behind the size.
int refuse_above_memory_limit(const std::string& command, double max_memory_gib, double bytes,
                              const std::string& what, const std::string& remedy,
                              const boost::program_options::options_description& options);

// What path is if it exists and is not a regular file ("a directory", "a FIFO", ...), found with
// stat, which never opens it: opening a FIFO waits for a writer, forever. nullopt for a regular
// file, and for a path stat cannot see (missing, no permission), which the reader reports when
// it opens it.
std::optional<std::string> special_file(const std::string& path);

// The one check of an input file a flag names (--data, --config) before anything opens it:
// returns -1 for a regular file, a path stat cannot see (the reader names the problem) or an
// empty path (the flag not given), or 2 after the usage error "<flag> <path>: not a regular file
// (a directory)".
int check_input_file(const std::string& command, const std::string& flag, const std::string& path,
                     const boost::program_options::options_description& options);

// Throws CheckpointError ("<path>: not a regular file (a FIFO)") when a checkpoint path (for
// --checkpoint or --resume) is a special file other than a directory. The checkpoint reader
// opens a directory without waiting and refuses it itself, and leaves room for a command that
// accepts a run directory.
void require_checkpoint_file(const std::string& path);

}  // namespace gradlab::cli
