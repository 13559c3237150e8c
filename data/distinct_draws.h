// Drawing without replacement: the tasks whose sequences need distinct tokens (mqar's keys and
// values, induction's blocks) share one sampler, so that their draws from a stream agree with
// the documented rule.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/random.h"

namespace gradlab::data {

// count distinct values of first..first + pool - 1 in a uniform random order: a partial
// Fisher-Yates shuffle that stores only the slots it has swapped, so a large pool costs nothing.
// Needs count <= pool.
std::vector<int64_t> distinct_draws(Generator& gen, int64_t first, int64_t pool, int64_t count);

}  // namespace gradlab::data
