// Head scores: every hook_pattern point of a model cached on random sequences repeated twice,
// and three of each head's diagonals averaged.
#include "interp/head_scores.h"

#include <limits>
#include <numeric>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "nn/hooks.h"

namespace gradlab::interp {
namespace {

// The mean of pattern[b, h, i, i - offset] over the B sequences and the queries i in
// [first, last); pattern is [B, H, T, T], flattened row-major.
double mean_diagonal(const std::vector<double>& pattern, const Shape& shape, int64_t head,
                     int64_t offset, int64_t first, int64_t last) {
  const int64_t sequences = shape[0], heads = shape[1], t = shape[2];
  double sum = 0;
  for (int64_t b = 0; b < sequences; ++b) {
    const int64_t rows = (b * heads + head) * t;
    for (int64_t i = first; i < last; ++i) {
      sum += pattern[static_cast<size_t>((rows + i) * t + i - offset)];
    }
  }
  return sum / static_cast<double>(sequences * (last - first));
}

LayerHeadScores score_point(const std::string& point, const Tensor& pattern, int64_t n) {
  const Shape& shape = pattern.shape();  // [B, H, Tq, Tk]
  if (shape.size() != 4 || shape[2] != 2 * n || shape[3] != 2 * n) {
    throw ShapeError("head scores: " + point + " is " + to_string(shape) + "; expected [B, H, " +
                     std::to_string(2 * n) + ", " + std::to_string(2 * n) +
                     "] for sequences of 2 x " + std::to_string(n) + " tokens");
  }
  const std::vector<double> values = pattern.to_vector();
  LayerHeadScores scores{point, {}, {}, {}};
  for (int64_t h = 0; h < shape[1]; ++h) {
    scores.previous_token.push_back(mean_diagonal(values, shape, h, 1, 1, 2 * n));
    scores.duplicate_token.push_back(mean_diagonal(values, shape, h, n, n, 2 * n));
    scores.induction.push_back(mean_diagonal(values, shape, h, n - 1, n, 2 * n));
  }
  return scores;
}

}  // namespace

int64_t max_head_score_length(const nn::SequenceModel& model) {
  return model.config().max_len / 2;
}

int64_t head_score_length(const nn::SequenceModel& model, const HeadScoreOptions& options) {
  const int64_t positions = model.config().max_len;
  const int64_t limit = max_head_score_length(model);
  const int64_t n = options.length == 0 ? limit : options.length;
  if (options.length == 0 && n < 2) {
    throw ConfigError("head scores: the model's " + std::to_string(positions) +
                      " positions hold no sequence of 2 tokens repeated (it needs 4)");
  }
  if (n < 2) {
    throw ConfigError("head scores: length " + std::to_string(n) +
                      " is below 2 (with one token a copy, the induction key i - n + 1 is the "
                      "query itself)");
  }
  if (n > limit) {
    throw ConfigError("head scores: length " + std::to_string(n) + " needs " +
                      std::to_string(2 * n) + " positions and the model has " +
                      std::to_string(positions) + " (the length is at most " +
                      std::to_string(limit) + ")");
  }
  return n;
}

Indices head_score_tokens(const nn::SequenceModel& model, const HeadScoreOptions& options) {
  const int64_t n = head_score_length(model, options);
  if (options.sequences < 1) {
    throw ConfigError("head scores: " + std::to_string(options.sequences) +
                      " sequences; at least 1 is needed");
  }
  // Below this bound the allocation reports a count too large for the memory; above it, the
  // count of tokens would overflow first.
  if (options.sequences > std::numeric_limits<int64_t>::max() / (2 * n)) {
    throw ConfigError("head scores: " + std::to_string(options.sequences) + " sequences of " +
                      std::to_string(2 * n) + " tokens are more tokens than can be counted");
  }
  const int64_t vocab = model.config().vocab_size;
  const bool distinct = n <= vocab;
  Generator gen(options.seed);
  std::vector<int64_t> values;
  values.reserve(static_cast<size_t>(options.sequences * 2 * n));
  std::vector<int64_t> pool(static_cast<size_t>(vocab));
  std::vector<int64_t> copy(static_cast<size_t>(n));
  for (int64_t b = 0; b < options.sequences; ++b) {
    std::iota(pool.begin(), pool.end(), 0);
    for (size_t i = 0; i < copy.size(); ++i) {
      if (distinct) {  // a partial Fisher-Yates shuffle of [0, V)
        std::swap(pool[i], pool[i + gen.below(pool.size() - i)]);
        copy[i] = pool[i];
      } else {
        copy[i] = static_cast<int64_t>(gen.below(pool.size()));
      }
    }
    values.insert(values.end(), copy.begin(), copy.end());
    values.insert(values.end(), copy.begin(), copy.end());
  }
  return Indices({options.sequences, 2 * n}, std::move(values));
}

std::vector<LayerHeadScores> head_scores(nn::SequenceModel& model,
                                         const HeadScoreOptions& options) {
  const int64_t n = head_score_length(model, options);
  const Indices tokens = head_score_tokens(model, options);
  nn::SequenceBatch batch{
      {},
      tokens,
      Indices(tokens.shape, std::vector<int64_t>(tokens.values.size(), nn::kIgnoreTarget))};
  // A model that reads a source (the encoder-decoder) lays a sample out with one.
  if (!model.make_batch(Indices({1, 3}, {0, 0, 0}), 1).source.shape.empty()) batch.source = tokens;
  NoGradGuard no_grad;
  nn::EvalScope eval(model);
  const nn::ActivationCache cache =
      run_with_cache(model, batch, "*hook_pattern", {.logits = false});
  std::vector<LayerHeadScores> scores;
  for (const std::string& point : cache.names()) {
    scores.push_back(score_point(point, cache.at(point), n));
  }
  return scores;
}

void HeadScoreReduction::add(const std::vector<std::string>& points,
                             const std::vector<Tensor>& patterns, const Indices& tokens) {
  const int64_t B = tokens.shape.at(0), T = tokens.shape.at(1);
  if (sums_.empty()) {
    for (const std::string& point : points) sums_.push_back({point, {}, {0, 0, 0}});
  }
  for (size_t p = 0; p < points.size(); ++p) {
    const Shape& shape = patterns[p].shape();  // [B, H, Tq, Tk]
    if (shape.size() != 4 || shape[0] != B || shape[2] != T || shape[3] != T) {
      throw ShapeError("head scores: " + points[p] + " is " + to_string(shape) + "; expected [" +
                       std::to_string(B) + ", H, " + std::to_string(T) + ", " + std::to_string(T) +
                       "] for the tokens read");
    }
    const int64_t H = shape[1];
    Sums& sums = sums_[p];
    for (std::vector<double>& kind : sums.sum) kind.resize(static_cast<size_t>(H), 0.0);
    const std::vector<double> values = patterns[p].to_vector();
    for (int64_t b = 0; b < B; ++b) {
      const int64_t* row = tokens.values.data() + b * T;
      for (int64_t i = 0; i < T; ++i) {
        // The keys each kind looks for from query i.
        std::vector<int64_t> keys[3];
        if (i >= 1) keys[0].push_back(i - 1);
        for (int64_t j = 0; j < i; ++j) {
          if (row[j] != row[i]) continue;
          keys[1].push_back(j);
          keys[2].push_back(j + 1);
        }
        for (size_t kind = 0; kind < 3; ++kind) {
          if (keys[kind].empty()) continue;
          ++sums.queries[kind];
          for (int64_t h = 0; h < H; ++h) {
            const double* weights = values.data() + ((b * H + h) * T + i) * T;
            for (const int64_t j : keys[kind]) sums.sum[kind][static_cast<size_t>(h)] += weights[j];
          }
        }
      }
    }
  }
}

std::vector<LayerHeadScores> HeadScoreReduction::scores() const {
  std::vector<LayerHeadScores> out;
  for (const Sums& sums : sums_) {
    LayerHeadScores point{sums.point, {}, {}, {}};
    std::vector<double>* kinds[3] = {&point.previous_token, &point.duplicate_token,
                                     &point.induction};
    for (size_t kind = 0; kind < 3; ++kind) {
      for (const double sum : sums.sum[kind]) {
        // A kind no query met (no token repeats) scores 0.
        kinds[kind]->push_back(
            sums.queries[kind] == 0 ? 0.0 : sum / static_cast<double>(sums.queries[kind]));
      }
    }
    out.push_back(std::move(point));
  }
  return out;
}

}  // namespace gradlab::interp
