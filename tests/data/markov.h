// A text source whose entropy is known exactly, for tests/train/test_entropy.cpp: a seeded
// first-order Markov chain over a small alphabet. Each character is followed by one of a few
// successors with fixed random probabilities, so the best possible prediction of the next
// character, and with it the lowest possible loss, is computable: the entropy rate
// H = sum_s pi(s) * H(next | s), with pi the chain's stationary distribution. A language model
// trained on its text should approach H and can never beat it; a loss below H means the model
// sees what it should not (a broken causal mask), far above it that it predicts the wrong thing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradlab::testing {

class MarkovText {
 public:
  // `letters` characters from 'a' on, each with `successors` possible next characters.
  MarkovText(int64_t letters, int64_t successors, uint64_t seed);

  // `length` characters of the chain, started from its stationary distribution.
  std::string generate(int64_t length, uint64_t seed) const;
  // H in bits per character.
  double entropy_rate_bits() const;
  // The stationary probability of each letter.
  const std::vector<double>& stationary() const { return stationary_; }

 private:
  int64_t letters_;
  std::vector<std::vector<double>> next_;  // [letter][letter]: P(next | current)
  std::vector<double> stationary_;
};

}  // namespace gradlab::testing
