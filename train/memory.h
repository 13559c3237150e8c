// The memory a run's configuration needs, estimated before anything is allocated, and the limit
// it must stay under (--max-memory): a configuration too large for the machine is refused with
// the flags that make it so, instead of failing in the allocator after gigabytes.
#pragma once

#include <string>

#include "train/config.h"

namespace gradlab::train {

// What the estimate is worth, said wherever it is quoted: measured peaks of resident memory were
// 0.33-1.43 times it (BENCHMARKS.md, "The memory estimate"): the per-position counts of
// ModelFootprint miss buffers the fused kernels and the encoder-decoder's short sequences take,
// and count attention weights the lane kernel of short sequences never keeps. Not an upper
// bound, then.
constexpr const char* kEstimateNote =
    "an estimate: measured peaks were 0.33-1.43 times it, the most for the encoder-decoder on "
    "short sequences";

struct MemoryEstimate {
  double state = 0;        // the program, parameters, their gradients and the optimizer's moments
  double activations = 0;  // what one training batch keeps for backward, and its gradients
  double heldout = 0;      // the held-out set's tokens and one evaluation chunk
  double total() const { return state + activations + heldout; }
};

// Bytes, for a finalized config (vocabulary and positions known). The tokens of a text file
// come on top: 1 to 4 bytes per token, known only once the file is read.
MemoryEstimate estimate_memory(const RunConfig& config);

// The limit in bytes: --max-memory GiB, or with 0 (the default) 80% of the machine's memory.
double memory_limit(double max_memory_gib);
double memory_limit(const RunConfig& config);

// "2.5 GiB": how the estimates are quoted.
std::string gib(double bytes);

// Throws ConfigError when the estimate is above the limit, naming the flags behind the
// largest part and --max-memory.
void check_memory(const RunConfig& config);

}  // namespace gradlab::train
