// The start-up comparison of a group's processes (same_start.h).
#include "cli/same_start.h"

#include <algorithm>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "autograd/cpu.h"
#include "cli/commands.h"
#include "data/text.h"
#include "train/fingerprint.h"

namespace gradlab::cli {
namespace {

using namespace train;

// A language model's tokens and vocabulary: equal for equal texts. 0 for a generated task.
uint64_t text_fingerprint(const data::Task& task) {
  const data::LanguageModelTask* text = task.language_model();
  if (!text) return 0;
  const std::string symbols = text->vocabulary().serialize();
  const std::string_view tokens = text->token_bytes();
  return fingerprint(tokens.data(), tokens.size(), fingerprint(symbols.data(), symbols.size()));
}

}  // namespace

int check_same_start(const RunConfig& config, const data::Task& task, const Trainer& trainer,
                     ProcessGroup& group) {
  const std::string settings = to_config_file(config);
  const std::vector<std::pair<std::string, uint64_t>> checks = {
      // The variants round alike only within themselves: replicas on different ones would drift
      // apart by an ulp at a time.
      {"kernel instruction set (rank 0 runs " + isa_name(kernel_isa()) +
           "; on processors that differ, set GRADLAB_ISA to the lowest on every process)",
       static_cast<uint64_t>(kernel_isa())},
      {"configuration", fingerprint(settings.data(), settings.size())},
      {"text (--data)", text_fingerprint(task)},
      {"starting state (parameters, optimizer, step; on --resume, the checkpoint read)",
       trainer.state_hash()},
  };
  for (const auto& [what, value] : checks) {
    const std::vector<uint64_t> all = group.gather(value);
    const auto other =
        std::find_if(all.begin(), all.end(), [&](uint64_t v) { return v != all[0]; });
    if (other == all.end()) continue;
    if (group.rank() == 0) {
      std::cerr << "gradlab train: rank " << (other - all.begin()) << " of " << group.size()
                << " has a different " << what
                << " than rank 0; every process must run the same gradlab, command line and "
                   "files (see docs/parallel.md: Several processes or machines)\n";
    }
    return kExitFailure;
  }
  return -1;
}

}  // namespace gradlab::cli
