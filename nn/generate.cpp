#include "nn/generate.h"

#include <algorithm>
#include <cmath>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"

namespace gradlab::nn {
namespace {

// The last row of logits [1, T, V], as floats.
std::vector<float> last_row(const Tensor& logits) {
  const Tensor row = logits.to(DType::Float32);
  const int64_t vocab = row.size(-1);
  const float* last = row.data<float>() + (row.numel() - vocab);
  return std::vector<float>(last, last + vocab);
}

Indices as_batch(std::vector<int64_t>::const_iterator begin,
                 std::vector<int64_t>::const_iterator end) {
  return Indices({1, static_cast<int64_t>(end - begin)}, std::vector<int64_t>(begin, end));
}

}  // namespace

int64_t sample_token(const std::vector<float>& logits, const SamplingOptions& options,
                     Generator& gen) {
  const auto greedy = std::max_element(logits.begin(), logits.end());  // the first maximum
  if (options.temperature == 0) return greedy - logits.begin();
  std::vector<double> scaled(logits.size());
  for (size_t v = 0; v < logits.size(); ++v) {
    scaled[v] = (logits[v] - *greedy) / options.temperature;  // <= 0: exp cannot overflow
  }
  if (options.top_k > 0 && options.top_k < static_cast<int64_t>(logits.size())) {
    std::vector<double> sorted = scaled;
    std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(),
                     std::greater<>());
    const double kth = sorted[static_cast<size_t>(options.top_k - 1)];
    for (double& s : scaled) {
      if (s < kth) s = -INFINITY;
    }
  }
  double total = 0;
  for (double& s : scaled) total += (s = std::exp(s));
  double draw = gen.uniform() * total;
  for (size_t v = 0; v < scaled.size(); ++v) {
    if (scaled[v] > 0 && (draw -= scaled[v]) < 0) return static_cast<int64_t>(v);
  }
  return greedy - logits.begin();  // rounding left the draw at the very end
}

std::vector<int64_t> generate(
    SequenceModel& model, int64_t context, const std::vector<int64_t>& prompt,
    const SamplingOptions& options,
    const std::function<void(int64_t token, const std::vector<float>& logits)>& on_token) {
  if (prompt.empty()) throw ConfigError("generate: the prompt is empty");
  if (options.tokens < 0 || !(options.temperature >= 0) || options.top_k < 0 || context < 1) {
    throw ConfigError("generate: tokens " + format_number(options.tokens) + ", temperature " +
                      format_number(options.temperature) + ", top_k " +
                      format_number(options.top_k) + " and context " + format_number(context) +
                      " must not be negative (context at least 1)");
  }
  NoGradGuard no_grad;
  // Evaluation mode for the whole generation, and the caller's mode back after it.
  struct Mode {
    SequenceModel& model;
    bool training = model.is_training();
    ~Mode() { model.train(training); }
  } mode{model};
  model.eval();
  Generator gen(options.seed);
  std::vector<int64_t> sequence = prompt, generated;
  GenerationCache cache;
  // Tokens of `sequence` not yet in the cache start here.
  size_t unread = sequence.size() - std::min<size_t>(sequence.size(), context);
  for (int64_t i = 0; i < options.tokens; ++i) {
    std::vector<float> logits;
    if (!options.use_cache) {
      const size_t first = sequence.size() - std::min<size_t>(sequence.size(), context);
      logits =
          last_row(model.forward({{}, as_batch(sequence.begin() + first, sequence.end()), {}}));
    } else {
      if (cache.length + static_cast<int64_t>(sequence.size() - unread) > context) {
        cache = GenerationCache{};
        unread = sequence.size() - std::max<size_t>(1, context / 2);
      }
      logits = last_row(model.forward_incremental(
          as_batch(sequence.begin() + static_cast<int64_t>(unread), sequence.end()), cache));
      unread = sequence.size();
    }
    const int64_t token = sample_token(logits, options, gen);
    sequence.push_back(token);
    generated.push_back(token);
    if (on_token) on_token(token, logits);
  }
  return generated;
}

}  // namespace gradlab::nn
