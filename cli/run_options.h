// The flags of `gradlab train`: RunConfig's field table (train/config.h) as
// Boost.Program_options options, so a hyperparameter is named, documented and checked once.
#pragma once

#include <boost/program_options.hpp>
#include <set>
#include <string>

#include "train/config.h"

namespace gradlab::cli {

// Adds every field of config that is a flag (every task's options included) as a flag bound to
// it, defaults shown as typed (0.003, not 0.0030000000000000001), a renamed field's old name
// too, and --out.
void add_run_options(boost::program_options::options_description& options,
                     train::RunConfig& config);

// Sets each renamed field given under its old name (--target-accuracy) unless its new name was
// given too; call it once the flags and the config file are stored and notified.
void apply_old_names(const boost::program_options::variables_map& vm, train::RunConfig& config);

// reason with each renamed field that vm holds under its old name only written as that name
// ("--target-accuracy must be in [0, 1]"): a message names the flag the user typed.
std::string as_typed(std::string reason, const boost::program_options::variables_map& vm,
                     train::RunConfig& config);

// Sets the defaults that differ for the run's task (data::apply_own_defaults: mqar's --symbols)
// where neither a flag nor the config file gave a value; call it after apply_old_names.
void apply_task_defaults(const boost::program_options::variables_map& vm, train::RunConfig& config);

// The reason to refuse a task option that the run's task does not read (a task reads the
// options of its row of data::task_kinds()), or "": given as a flag (`--data FILE` without
// `--task text` would train the copy task and ignore the file), or as a line of config_file
// with another value than the option's default (gradlab's config.ini files written before
// they held their own task's options only list every task's, at their defaults). command_line:
// the options given as flags. Call it once the task is known to be a row of the table.
std::string option_of_another_task(const boost::program_options::variables_map& vm,
                                   const std::set<std::string>& command_line,
                                   const std::string& config_file, train::RunConfig config);

}  // namespace gradlab::cli
