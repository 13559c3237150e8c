// An explicit, seedable random generator (xoshiro256** seeded through splitmix64). There is no
// global RNG: every function that draws takes a Generator&. The bit stream and the derived
// uniform/normal values depend only on the seed, not on the standard library, so the same seed
// gives the same numbers in every build. The state is four words, saved in checkpoints.
#pragma once

#include <array>
#include <cstdint>

namespace gradlab {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0);

  uint64_t next_u64();
  // Uniform in [0, 1) with 53 random bits.
  double uniform();
  // Standard normal by Box-Muller (one value per call; the pair's second half is discarded so
  // that the state alone describes the stream).
  double normal();
  // Uniform integer in [0, n), unbiased.
  uint64_t below(uint64_t n);

  std::array<uint64_t, 4> state() const { return state_; }
  void set_state(const std::array<uint64_t, 4>& state) { state_ = state; }

 private:
  std::array<uint64_t, 4> state_;
};

}  // namespace gradlab
