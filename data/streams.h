// The random streams every data source draws from: stream `index` of a seed gets a generator of
// its own, so a batch is a pure function of (seed, step) and never depends on call order.
#pragma once

#include <cstdint>

namespace gradlab::data {

// splitmix64's output function: a bijection of 64-bit words with good avalanche.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// Seed of stream `index` of `seed`. For a fixed seed it is a bijection of index, so distinct
// indices never share a generator. Training steps use indices 0..2^63-1; held-out data uses
// kHeldoutIndex and a task's split of a finite set into training and held-out parts
// kSplitIndex, which no training step reaches.
constexpr uint64_t stream_seed(uint64_t seed, uint64_t index) {
  return splitmix64(splitmix64(seed) ^ index);
}
constexpr uint64_t kHeldoutIndex = ~0ULL;
constexpr uint64_t kSplitIndex = ~0ULL - 1;

}  // namespace gradlab::data
