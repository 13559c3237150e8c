// The sampler without replacement (distinct_draws.h).
#include "data/distinct_draws.h"

#include <unordered_map>

namespace gradlab::data {

std::vector<int64_t> distinct_draws(Generator& gen, int64_t first, int64_t pool, int64_t count) {
  std::unordered_map<int64_t, int64_t> swapped;
  const auto at = [&](int64_t i) {
    const auto it = swapped.find(i);
    return it == swapped.end() ? i : it->second;
  };
  std::vector<int64_t> drawn;
  drawn.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const int64_t j = i + static_cast<int64_t>(gen.below(static_cast<uint64_t>(pool - i)));
    const int64_t picked = at(j);
    swapped[j] = at(i);
    drawn.push_back(first + picked);
  }
  return drawn;
}

}  // namespace gradlab::data
