#include "tests/data/markov.h"

#include <cmath>

#include "autograd/error.h"
#include "autograd/random.h"

namespace gradlab::testing {

MarkovText::MarkovText(int64_t letters, int64_t successors, uint64_t seed) : letters_(letters) {
  if (letters < 2 || letters > 26 || successors < 1 || successors > letters) {
    throw ConfigError("MarkovText: needs 2..26 letters and 1..letters successors");
  }
  Generator gen(seed);
  next_.assign(letters, std::vector<double>(letters, 0.0));
  for (int64_t from = 0; from < letters; ++from) {
    double total = 0;
    for (int64_t k = 0; k < successors; ++k) {
      // Successors from + 1, from + 1 + ..., wrapping: every letter is reachable, so the chain
      // has one stationary distribution.
      const int64_t to = (from + 1 + k * 3) % letters;
      const double weight = 0.2 + gen.uniform();
      next_[from][to] += weight;
      total += weight;
    }
    for (double& p : next_[from]) p /= total;
  }
  // pi = pi P, by power iteration from the uniform distribution (the chain is aperiodic when
  // some letter has successors of different step lengths; the averaging below covers the rest).
  std::vector<double> pi(letters, 1.0 / static_cast<double>(letters)), sum(letters, 0.0);
  for (int iteration = 0; iteration < 20000; ++iteration) {
    std::vector<double> next(letters, 0.0);
    for (int64_t from = 0; from < letters; ++from) {
      for (int64_t to = 0; to < letters; ++to) next[to] += pi[from] * next_[from][to];
    }
    pi = next;
    for (int64_t s = 0; s < letters; ++s) sum[s] += pi[s];
  }
  for (double& p : sum) p /= 20000.0;
  stationary_ = sum;
}

std::string MarkovText::generate(int64_t length, uint64_t seed) const {
  Generator gen(seed);
  const auto draw = [&](const std::vector<double>& probabilities) {
    double u = gen.uniform();
    for (int64_t s = 0; s < letters_; ++s) {
      if ((u -= probabilities[s]) < 0) return s;
    }
    return letters_ - 1;
  };
  std::string text;
  int64_t state = draw(stationary_);
  for (int64_t i = 0; i < length; ++i) {
    text += static_cast<char>('a' + state);
    state = draw(next_[state]);
  }
  return text;
}

double MarkovText::entropy_rate_bits() const {
  double rate = 0;
  for (int64_t from = 0; from < letters_; ++from) {
    for (double p : next_[from]) {
      if (p > 0) rate -= stationary_[from] * p * std::log2(p);
    }
  }
  return rate;
}

}  // namespace gradlab::testing
