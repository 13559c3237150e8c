// The Fourier analysis (interp/fourier.h) on planted data: the basis is orthonormal, a planted
// embedding's frequencies and shares are found, a planted neuron is clustered at its frequency,
// a planted logit table's energy sits at its frequency, the kept and removed parts sum to the
// logits, and the refusals of bad arguments.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "autograd/error.h"
#include "autograd/random.h"
#include "interp/fourier.h"
#include "tests/test_helpers.h"

namespace gradlab::interp {
namespace test_fourier {

using testing::contains;

double angle(int64_t k, int64_t x, int64_t p) {
  return 2 * std::numbers::pi * static_cast<double>(k * x) / static_cast<double>(p);
}

TEST(Fourier, TheBasisIsOrthonormalWithTheConstantFirst) {
  for (const int64_t p : {3, 13, 113}) {
    SCOPED_TRACE(p);
    const std::vector<double> b = fourier_basis(p);
    ASSERT_EQ(static_cast<int64_t>(b.size()), p * p);
    for (int64_t i = 0; i < p; ++i) {
      for (int64_t j = 0; j < p; ++j) {
        double dot = 0;
        for (int64_t x = 0; x < p; ++x) dot += b[i * p + x] * b[j * p + x];
        ASSERT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-12) << i << ", " << j;
      }
    }
    EXPECT_NEAR(b[0], 1 / std::sqrt(static_cast<double>(p)), 1e-15);
    // Row 2k - 1 is cos k, row 2k sin k.
    const int64_t k = frequency_count(p);
    EXPECT_NEAR(b[(2 * k - 1) * p + 1] / b[(2 * k - 1) * p], std::cos(angle(k, 1, p)), 1e-12);
    EXPECT_NEAR(b[2 * k * p + 1] / b[(2 * k - 1) * p], std::sin(angle(k, 1, p)), 1e-12);
  }
  EXPECT_THROW(fourier_basis(12), ConfigError);
  EXPECT_THROW(fourier_basis(1), ConfigError);
}

TEST(Fourier, APlantedEmbeddingHasItsFrequenciesAndShares) {
  const int64_t p = 17, C = 4;
  const std::vector<double> b = fourier_basis(p);
  // Columns: 5 x the constant, 3 x cos 3, 1 x sin 7, 0: squared norms 9 and 1 beside the constant.
  std::vector<double> embedding(static_cast<size_t>(p * C), 0.0);
  for (int64_t x = 0; x < p; ++x) {
    embedding[x * C] = 5 * b[x];
    embedding[x * C + 1] = 3 * b[5 * p + x];
    embedding[x * C + 2] = 1 * b[14 * p + x];
  }
  const std::vector<double> norms = embedding_frequency_norms(embedding, p);
  ASSERT_EQ(static_cast<int64_t>(norms.size()), frequency_count(p) + 1);
  EXPECT_NEAR(norms[0], 5, 1e-12);
  EXPECT_NEAR(norms[3], 3, 1e-12);
  EXPECT_NEAR(norms[7], 1, 1e-12);
  EXPECT_NEAR(norms[1] + norms[2] + norms[4] + norms[8], 0, 1e-12);

  const KeyFrequencies most = key_frequencies(norms, 0.9);
  EXPECT_EQ(most.frequencies, std::vector<int64_t>{3});
  const KeyFrequencies both = key_frequencies(norms, 0.95);
  ASSERT_EQ(both.frequencies, (std::vector<int64_t>{3, 7}));
  EXPECT_NEAR(both.shares[0], 0.9, 1e-12);
  EXPECT_NEAR(both.shares[1], 0.1, 1e-12);
  EXPECT_THROW(key_frequencies(norms, 0), ConfigError);
  EXPECT_THROW(key_frequencies(norms, 1.5), ConfigError);
}

TEST(Fourier, ANeuronOfCosKTimesASumIsClusteredAtK) {
  const int64_t p = 17, k = 5, N = 3;
  Generator gen(7);
  std::vector<double> activations(static_cast<size_t>(p * p * N));
  for (int64_t a = 0; a < p; ++a) {
    for (int64_t b = 0; b < p; ++b) {
      double* row = activations.data() + (a * p + b) * N;
      row[0] = 2 + std::cos(angle(k, a + b, p));  // a frequency-k neuron, mean 2
      row[1] = gen.normal();                      // noise: no frequency holds 85%
      row[2] = 4;                                 // constant: no variance
    }
  }
  const NeuronClusters c = neuron_clusters(activations, p, N);
  const int64_t K = frequency_count(p);
  EXPECT_GE(c.shares[0 * (K + 1) + k], 0.99);
  EXPECT_EQ(c.frequency, (std::vector<int64_t>{k, c.frequency[1], 0}));
  EXPECT_EQ(c.cluster, (std::vector<int64_t>{k, 0, 0}));
  EXPECT_EQ(c.counts[0], 2);
  EXPECT_EQ(c.counts[k], 1);
  EXPECT_NEAR(c.clustered_fraction, 1.0 / 3, 1e-15);
  double noise = 0;  // the noise neuron's shares are a partition of part of its variance
  for (int64_t f = 1; f <= K; ++f) noise += c.shares[1 * (K + 1) + f];
  EXPECT_LT(noise, 1 + 1e-12);
  EXPECT_LT(c.shares[1 * (K + 1) + c.frequency[1]], 0.85);
  EXPECT_THROW(neuron_clusters(activations, p, N + 1), ShapeError);
}

// logits [p * p, p] = scale cos(w k (a + b - c)) + noise.
std::vector<double> planted_logits(int64_t p, int64_t k, double scale, double noise) {
  Generator gen(3);
  std::vector<double> logits(static_cast<size_t>(p * p * p));
  for (int64_t a = 0; a < p; ++a) {
    for (int64_t b = 0; b < p; ++b) {
      for (int64_t c = 0; c < p; ++c) {
        logits[(a * p + b) * p + c] =
            scale * std::cos(angle(k, a + b - c, p)) + noise * gen.normal();
      }
    }
  }
  return logits;
}

TEST(Fourier, APlantedLogitTableSplitsIntoItsKeyFrequencyAndTheRest) {
  const int64_t p = 11, k = 4, K = frequency_count(p);
  const std::vector<double> pure = planted_logits(p, k, 3, 0);
  const std::vector<double> norms = logit_frequency_norms(pure, p);
  double total = 0;
  for (const double n : norms) total += n * n;
  EXPECT_NEAR(norms[k * (K + 1) + k] * norms[k * (K + 1) + k], total, 1e-9 * total);

  const std::vector<double> noisy = planted_logits(p, k, 3, 0.5);
  for (const auto& key : {std::vector<int64_t>{k}, std::vector<int64_t>{1, k, 5}}) {
    const LogitSplit split = split_logits(noisy, p, key);
    double kept = 0, removed = 0;
    for (size_t i = 0; i < noisy.size(); ++i) {
      ASSERT_NEAR(split.kept[i] + split.removed[i], noisy[i], 1e-12);
      kept += split.kept[i] * split.kept[i];
      removed += split.removed[i] * split.removed[i];
    }
    // The planted part, 9 p^3 / 2, is kept; of the noise, 0.25 per entry, only a sliver.
    EXPECT_GT(kept, 0.95 * 9 * p * p * p / 2);
    EXPECT_LT(kept, 1.05 * 9 * p * p * p / 2);
    EXPECT_NEAR(removed / (0.25 * p * p * p), 1, 0.2);
  }
  // Without its frequency, nothing of the planted table is kept.
  const LogitSplit other = split_logits(pure, p, {2});
  for (size_t i = 0; i < pure.size(); ++i) ASSERT_NEAR(other.kept[i], 0, 1e-12);
  EXPECT_THROW(split_logits(pure, p, {K + 1}), ConfigError);
}

TEST(Fourier, RestrictedLossOfAKeyOnlyTableIsItsLossAndExcludedIsChance) {
  const int64_t p = 11, k = 4;
  // The answer c = a + b is the argmax of cos(w k (a + b - c)): every input answered right.
  const std::vector<double> logits = planted_logits(p, k, 6, 0);
  std::vector<int64_t> answers(static_cast<size_t>(p * p));
  std::vector<uint8_t> train(answers.size());
  for (int64_t i = 0; i < p * p; ++i) {
    answers[static_cast<size_t>(i)] = (i / p + i % p) % p;
    train[static_cast<size_t>(i)] = i % 3 == 0;
  }
  const FourierLosses l = fourier_losses(logits, p, answers, train, {k});
  EXPECT_NEAR(l.train, l.test, 1e-12);  // every input alike
  EXPECT_NEAR(l.restricted, l.train, 1e-9);
  EXPECT_NEAR(l.excluded, std::log(static_cast<double>(p)), 1e-9);  // nothing left: uniform
  EXPECT_LT(l.train, 0.5 * std::log(static_cast<double>(p)));
  train.assign(train.size(), 1);
  try {
    fourier_losses(logits, p, answers, train, {k});
    FAIL() << "no held-out input accepted";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "held-out part of the pairs is empty")) << e.what();
  }
}

}  // namespace test_fourier
}  // namespace gradlab::interp
