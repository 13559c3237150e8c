// The flags of `gradlab train`: RunConfig's field table (train/config.h) as
// Boost.Program_options options, so a hyperparameter is named, documented and checked once.
#pragma once

#include <boost/program_options.hpp>

#include "train/config.h"

namespace gradlab::cli {

// Adds every field of config as a flag bound to it, defaults shown as typed (0.003, not
// 0.0030000000000000001), and --out.
void add_run_options(boost::program_options::options_description& options,
                     train::RunConfig& config);

}  // namespace gradlab::cli
