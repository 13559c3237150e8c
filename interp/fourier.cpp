// The Fourier analysis of a modular-addition model: the basis, the spectra of the embedding, the
// neurons and the logits, and the restricted and excluded losses.
#include "interp/fourier.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"
#include "nn/hooks.h"
#include "nn/models.h"

namespace gradlab::interp {
namespace {

using RowMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// The frequency of basis row i: 0 for the constant, k for cos k and sin k.
int64_t frequency_of_row(int64_t i) {
  return (i + 1) / 2;
}

void require_size(const std::vector<double>& values, int64_t size, const char* caller,
                  const std::string& shape) {
  if (static_cast<int64_t>(values.size()) != size) {
    throw ShapeError(std::string(caller) + ": " + format_number(values.size()) +
                     " values do not fill " + shape);
  }
}

void require_share(double share, const char* what) {
  if (!(share > 0 && share <= 1)) {
    throw ConfigError(std::string(what) + " " + format_number(share) + " is not in (0, 1]");
  }
}

// values [p * p, N], row a * p + b, transformed on both axes: [p (a's basis row), p (b's), N].
RowMatrix transform_pairs(const std::vector<double>& values, int64_t p, int64_t n) {
  const RowMatrix basis = Eigen::Map<const RowMatrix>(fourier_basis(p).data(), p, p);
  // As [p, p * N] (row a, column b * N + column): the transform along a is one product.
  const RowMatrix along_a = basis * Eigen::Map<const RowMatrix>(values.data(), p, p * n);
  RowMatrix both(p, p * n);
  for (int64_t i = 0; i < p; ++i) {
    const Eigen::Map<const RowMatrix> row(along_a.row(i).data(), p, n);  // [p (b), N]
    Eigen::Map<RowMatrix>(both.row(i).data(), p, n) = basis * row;
  }
  return both;
}

// Cross-entropy of one row of p logits at answer c.
double row_loss(const double* logits, int64_t p, int64_t c) {
  const double top = *std::max_element(logits, logits + p);
  double sum = 0;
  for (int64_t j = 0; j < p; ++j) sum += std::exp(logits[j] - top);
  return top + std::log(sum) - logits[c];
}

double mean_loss(const std::vector<double>& logits, int64_t p, const std::vector<int64_t>& answers,
                 const std::vector<uint8_t>& rows, uint8_t selected) {
  double sum = 0;
  int64_t count = 0;
  for (size_t r = 0; r < answers.size(); ++r) {
    if (rows[r] != selected) continue;
    sum += row_loss(logits.data() + r * static_cast<size_t>(p), p, answers[r]);
    ++count;
  }
  return sum / static_cast<double>(count);
}

}  // namespace

int64_t frequency_count(int64_t p) {
  return (p - 1) / 2;
}

std::vector<double> fourier_basis(int64_t p) {
  if (p < 3 || p % 2 == 0) {
    throw ConfigError("the Fourier basis over " + format_number(p) +
                      " numbers: the modulus must be odd and at least 3 (an even one has a "
                      "cosine without its sine)");
  }
  std::vector<double> basis(static_cast<size_t>(p * p));
  for (int64_t i = 0; i < p; ++i) {
    const int64_t k = frequency_of_row(i);
    double* row = basis.data() + i * p;
    for (int64_t x = 0; x < p; ++x) {
      const double angle =
          2 * std::numbers::pi * static_cast<double>(k * x) / static_cast<double>(p);
      row[x] = i == 0 ? 1.0 : i % 2 == 1 ? std::cos(angle) : std::sin(angle);
    }
    const double norm = std::sqrt(std::inner_product(row, row + p, row, 0.0));
    for (int64_t x = 0; x < p; ++x) row[x] /= norm;
  }
  return basis;
}

KeyFrequencies key_frequencies(const std::vector<double>& norms, double share) {
  require_share(share, "key frequencies: the share");
  std::vector<int64_t> order;
  double total = 0;
  for (size_t k = 1; k < norms.size(); ++k) {
    order.push_back(static_cast<int64_t>(k));
    total += norms[k] * norms[k];
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return norms[static_cast<size_t>(x)] > norms[static_cast<size_t>(y)];
  });
  KeyFrequencies key;
  double held = 0;
  // A relative slack, so that a spectrum planted at exactly the share stops where it was planted.
  for (size_t i = 0; i < order.size() && total > 0 && held < share * total * (1 - 1e-12); ++i) {
    const double weight = norms[static_cast<size_t>(order[i])];
    key.frequencies.push_back(order[i]);
    key.shares.push_back(weight * weight / total);
    held += weight * weight;
  }
  return key;
}

std::vector<double> embedding_frequency_norms(const std::vector<double>& embedding, int64_t p) {
  const int64_t width = static_cast<int64_t>(embedding.size()) / std::max<int64_t>(p, 1);
  require_size(embedding, p * width, "embedding_frequency_norms", "[p, C]");
  const RowMatrix basis = Eigen::Map<const RowMatrix>(fourier_basis(p).data(), p, p);
  const RowMatrix spectrum = basis * Eigen::Map<const RowMatrix>(embedding.data(), p, width);
  std::vector<double> squared(static_cast<size_t>(frequency_count(p) + 1), 0.0);
  for (int64_t i = 0; i < p; ++i) {
    squared[static_cast<size_t>(frequency_of_row(i))] += spectrum.row(i).squaredNorm();
  }
  for (double& value : squared) value = std::sqrt(value);
  return squared;
}

NeuronClusters neuron_clusters(const std::vector<double>& activations, int64_t p, int64_t neurons,
                               double threshold) {
  require_share(threshold, "neuron clusters: the threshold");
  require_size(activations, p * p * neurons, "neuron_clusters",
               "[p * p, N] = [" + format_number(p * p) + ", " + format_number(neurons) + "]");
  const int64_t K = frequency_count(p);
  const RowMatrix spectrum = transform_pairs(activations, p, neurons);  // [p, p * N]
  NeuronClusters out;
  out.shares.assign(static_cast<size_t>(neurons * (K + 1)), 0.0);
  out.frequency.assign(static_cast<size_t>(neurons), 0);
  out.cluster.assign(static_cast<size_t>(neurons), 0);
  out.counts.assign(static_cast<size_t>(K + 1), 0);
  std::vector<double> total(static_cast<size_t>(neurons), 0.0);
  std::vector<double> mean_energy(static_cast<size_t>(neurons), 0.0);
  for (int64_t i = 0; i < p; ++i) {
    for (int64_t j = 0; j < p; ++j) {
      // The (0, 0) term is the mean, which a neuron's variance leaves out. A term belongs to a
      // frequency when its nonzero indices all have that frequency.
      if (i == 0 && j == 0) {
        for (int64_t n = 0; n < neurons; ++n) {
          mean_energy[static_cast<size_t>(n)] = std::pow(spectrum(0, n), 2);
        }
        continue;
      }
      const int64_t fi = frequency_of_row(i), fj = frequency_of_row(j);
      const int64_t k = fi == 0 ? fj : fj == 0 ? fi : fi == fj ? fi : 0;
      for (int64_t n = 0; n < neurons; ++n) {
        const double c = spectrum(i, j * neurons + n);
        total[static_cast<size_t>(n)] += c * c;
        if (k > 0) out.shares[static_cast<size_t>(n * (K + 1) + k)] += c * c;
      }
    }
  }
  for (int64_t n = 0; n < neurons; ++n) {
    double* shares = out.shares.data() + n * (K + 1);
    // A constant neuron's variance is rounding alone: no frequency's.
    const double variance =
        total[static_cast<size_t>(n)] > 1e-20 * mean_energy[static_cast<size_t>(n)]
            ? total[static_cast<size_t>(n)]
            : 0.0;
    for (int64_t k = 1; k <= K; ++k) shares[k] = variance > 0 ? shares[k] / variance : 0.0;
    const int64_t best = variance > 0 ? std::max_element(shares + 1, shares + K + 1) - shares : 0;
    out.frequency[static_cast<size_t>(n)] = best;
    const int64_t cluster = best > 0 && shares[best] >= threshold ? best : 0;
    out.cluster[static_cast<size_t>(n)] = cluster;
    ++out.counts[static_cast<size_t>(cluster)];
  }
  out.clustered_fraction =
      neurons > 0 ? static_cast<double>(neurons - out.counts[0]) / static_cast<double>(neurons) : 0;
  return out;
}

std::vector<double> logit_frequency_norms(const std::vector<double>& logits, int64_t p) {
  require_size(logits, p * p * p, "logit_frequency_norms", "[p * p, p]");
  const int64_t K = frequency_count(p);
  const RowMatrix spectrum = transform_pairs(logits, p, p);
  std::vector<double> norms(static_cast<size_t>((K + 1) * (K + 1)), 0.0);
  for (int64_t i = 0; i < p; ++i) {
    for (int64_t j = 0; j < p; ++j) {
      const double energy = spectrum.row(i).segment(j * p, p).squaredNorm();
      norms[static_cast<size_t>(frequency_of_row(i) * (K + 1) + frequency_of_row(j))] += energy;
    }
  }
  for (double& value : norms) value = std::sqrt(value);
  return norms;
}

LogitSplit split_logits(const std::vector<double>& logits, int64_t p,
                        const std::vector<int64_t>& frequencies) {
  require_size(logits, p * p * p, "split_logits", "[p * p, p]");
  const std::vector<double> basis = fourier_basis(p);
  const int64_t K = frequency_count(p);
  const Eigen::Map<const RowMatrix> full(logits.data(), p * p, p);
  RowMatrix kept = RowMatrix::Zero(p * p, p);
  Eigen::VectorXd cos_sum(p * p), sin_sum(p * p);
  for (const int64_t k : frequencies) {
    if (k < 1 || k > K) {
      throw ConfigError("split_logits: frequency " + format_number(k) + " is not in [1, " +
                        format_number(K) + "]");
    }
    const double* c = basis.data() + (2 * k - 1) * p;
    const double* s = basis.data() + 2 * k * p;
    // cos(w (a + b)) = cos a cos b - sin a sin b, sin(w (a + b)) = sin a cos b + cos a sin b:
    // unit vectors over the pairs, orthogonal to each other and to every other frequency's.
    for (int64_t a = 0; a < p; ++a) {
      for (int64_t b = 0; b < p; ++b) {
        cos_sum(a * p + b) = (c[a] * c[b] - s[a] * s[b]) / std::numbers::sqrt2;
        sin_sum(a * p + b) = (s[a] * c[b] + c[a] * s[b]) / std::numbers::sqrt2;
      }
    }
    kept += cos_sum * (cos_sum.transpose() * full);
    kept += sin_sum * (sin_sum.transpose() * full);
  }
  LogitSplit out;
  out.kept.assign(kept.data(), kept.data() + kept.size());
  out.removed.resize(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out.removed[i] = logits[i] - out.kept[i];
  return out;
}

FourierLosses fourier_losses(const std::vector<double>& logits, int64_t p,
                             const std::vector<int64_t>& answers, const std::vector<uint8_t>& train,
                             const std::vector<int64_t>& frequencies) {
  require_size(logits, p * p * p, "fourier_losses", "[p * p, p]");
  if (static_cast<int64_t>(answers.size()) != p * p || answers.size() != train.size()) {
    throw ShapeError("fourier_losses: " + format_number(answers.size()) + " answers and " +
                     format_number(train.size()) + " training marks for " + format_number(p * p) +
                     " pairs");
  }
  const int64_t trained = std::count(train.begin(), train.end(), uint8_t{1});
  if (trained == 0 || trained == p * p) {
    throw ConfigError("fourier_losses: the training or the held-out part of the pairs is empty");
  }
  const LogitSplit split = split_logits(logits, p, frequencies);
  // Nanda's bias correction: each answer's mean over the inputs of what the restriction removed.
  std::vector<double> restricted = split.kept, bias(static_cast<size_t>(p), 0.0);
  for (size_t i = 0; i < logits.size(); ++i) bias[i % static_cast<size_t>(p)] += split.removed[i];
  for (size_t i = 0; i < logits.size(); ++i) {
    restricted[i] += bias[i % static_cast<size_t>(p)] / static_cast<double>(p * p);
  }
  const std::vector<uint8_t> all(train.size(), 1);
  return {.train = mean_loss(logits, p, answers, train, 1),
          .test = mean_loss(logits, p, answers, train, 0),
          .restricted = mean_loss(restricted, p, answers, all, 1),
          .excluded = mean_loss(split.removed, p, answers, train, 1)};
}

namespace {

// What the model read and said over every pair: the grids analyze_fourier transforms.
struct PairGrids {
  std::vector<double> activations;  // [p * p, F]
  std::vector<double> logits;       // [p * p, p]
  std::vector<int64_t> answers;     // [p * p]
  std::vector<uint8_t> train;       // [p * p]
};

// Reads one batch of pairs into grids, marking them as training pairs or not.
void read_pairs(const nn::SequenceModel& model, const nn::SequenceBatch& batch, bool training,
                const ModularPairs& pairs, int64_t rows_per_pass, const std::string& point,
                std::vector<uint8_t>& seen, PairGrids& grids) {
  const int64_t p = pairs.modulus, rows = batch.inputs.shape.at(0), T = batch.inputs.shape.at(1);
  const auto number = [&](int64_t token, const char* what) {
    const int64_t x = token - pairs.first_number;
    if (x < 0 || x >= p) {
      throw ConfigError(std::string("Fourier analysis: ") + what + " token " +
                        format_number(token) + " is not one of the " + format_number(p) +
                        " numbers");
    }
    return x;
  };
  for (int64_t begin = 0; begin < rows; begin += rows_per_pass) {
    const int64_t count = std::min(rows_per_pass, rows - begin);
    const nn::SequenceBatch chunk = nn::rows_of(batch, begin, count);
    const nn::ActivationCache cache = nn::run_with_cache(model, chunk, nn::HookFilter(point));
    const std::vector<double> post = cache.at(point).to_vector();  // [B, T, F]
    const std::vector<double> logits = cache.logits.to_vector();   // [B, T, V]
    const int64_t F = cache.at(point).size(2), V = cache.logits.size(2);
    for (int64_t r = 0; r < count; ++r) {
      const int64_t* inputs = chunk.inputs.values.data() + r * T;
      const int64_t* targets = chunk.targets.values.data() + r * T;
      const int64_t t =
          std::find_if(targets, targets + T, [](int64_t v) { return v != nn::kIgnoreTarget; }) -
          targets;
      if (t < 2 || t == T) {
        throw ConfigError("Fourier analysis: a row has no answer after two numbers");
      }
      const int64_t pair = number(inputs[t - 2], "the first operand's") * p +
                           number(inputs[t - 1], "the second operand's");
      if (seen[static_cast<size_t>(pair)]++) {
        throw ConfigError("Fourier analysis: the pair " + format_number(pair / p) + ", " +
                          format_number(pair % p) + " comes twice");
      }
      grids.answers[static_cast<size_t>(pair)] = number(targets[t], "the answer's");
      grids.train[static_cast<size_t>(pair)] = training ? 1 : 0;
      if (grids.activations.empty()) grids.activations.resize(static_cast<size_t>(p * p * F));
      std::copy_n(post.begin() + (r * T + t) * F, F, grids.activations.begin() + pair * F);
      std::copy_n(logits.begin() + (r * T + t) * V + pairs.first_number, p,
                  grids.logits.begin() + pair * p);
    }
  }
}

}  // namespace

FourierAnalysis analyze_fourier(const nn::SequenceModel& model, const ModularPairs& pairs,
                                const FourierOptions& options) {
  const int64_t p = pairs.modulus;
  FourierAnalysis out;
  out.modulus = p;
  out.basis = fourier_basis(p);
  const auto* decoder = dynamic_cast<const nn::DecoderLM*>(&model);
  if (!decoder || decoder->blocks.empty() || !decoder->blocks.front()->ffn) {
    throw ConfigError(
        "Fourier analysis: it reads a decoder whose first block has a feed-forward sublayer");
  }
  const Tensor& embedding = decoder->embed->token_embedding->weight;  // [V, C]
  if (pairs.first_number < 0 || pairs.first_number + p > embedding.size(0)) {
    throw ConfigError("Fourier analysis: the " + format_number(p) + " numbers from token " +
                      format_number(pairs.first_number) + " are not in the vocabulary of " +
                      format_number(embedding.size(0)));
  }
  NoGradGuard no_graph;
  const std::vector<double> all = embedding.to_vector();
  const int64_t C = embedding.size(1);
  out.embedding_norms =
      embedding_frequency_norms(std::vector<double>(all.begin() + pairs.first_number * C,
                                                    all.begin() + (pairs.first_number + p) * C),
                                p);
  out.key = key_frequencies(out.embedding_norms, options.share);
  if (!options.key_frequencies.empty()) {
    double total = 0;
    for (size_t k = 1; k < out.embedding_norms.size(); ++k) {
      total += out.embedding_norms[k] * out.embedding_norms[k];
    }
    out.key = {.frequencies = options.key_frequencies, .shares = {}};
    for (const int64_t k : options.key_frequencies) {
      if (k < 1 || k > frequency_count(p)) {
        throw ConfigError("Fourier analysis: key frequency " + format_number(k) +
                          " is not in [1, " + format_number(frequency_count(p)) + "]");
      }
      const double norm = out.embedding_norms[static_cast<size_t>(k)];
      out.key.shares.push_back(total > 0 ? norm * norm / total : 0.0);
    }
  }

  const std::string point = "blocks.0.ffn.hook_post";
  PairGrids grids{.activations = {},
                  .logits = std::vector<double>(static_cast<size_t>(p * p * p)),
                  .answers = std::vector<int64_t>(static_cast<size_t>(p * p)),
                  .train = std::vector<uint8_t>(static_cast<size_t>(p * p))};
  std::vector<uint8_t> seen(static_cast<size_t>(p * p), 0);
  const int64_t rows = std::max<int64_t>(options.batch_rows, 1);
  read_pairs(model, pairs.train, true, pairs, rows, point, seen, grids);
  read_pairs(model, pairs.heldout, false, pairs, rows, point, seen, grids);
  const int64_t missing = std::count(seen.begin(), seen.end(), uint8_t{0});
  if (missing > 0) {
    throw ConfigError("Fourier analysis: " + format_number(missing) + " of the " +
                      format_number(p * p) +
                      " pairs are in neither the training nor the held-out "
                      "set");
  }
  const int64_t F = static_cast<int64_t>(grids.activations.size()) / (p * p);
  out.neurons = neuron_clusters(grids.activations, p, F, options.neuron_threshold);
  out.logit_norms = logit_frequency_norms(grids.logits, p);
  out.losses = fourier_losses(grids.logits, p, grids.answers, grids.train, out.key.frequencies);
  return out;
}

}  // namespace gradlab::interp
