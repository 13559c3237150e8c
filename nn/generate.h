// Generating running text with a language model (a SequenceModel trained on windows of text):
// each new token is drawn from the model's distribution after the ones before, with a
// temperature and an optional top-k cut, or taken greedily.
//
// The model reads at most `context` tokens (its position table). With the cache (the default),
// each new token costs one query against the cached keys and values: O(context) instead of
// re-reading the whole window. When the window is full the cache is rebuilt from the last
// context / 2 tokens (learned positions cannot slide), so the per-token cost stays flat on
// average. Without the cache every token re-reads the last `context` tokens; the two agree
// exactly until the first rebuild, and afterwards see different (shorter) histories.
#pragma once

#include <functional>
#include <vector>

#include "autograd/random.h"
#include "nn/sequence_model.h"

namespace gradlab::nn {

struct SamplingOptions {
  int64_t tokens = 200;      // how many to generate
  double temperature = 1.0;  // logits / temperature; 0: greedy (ties go to the lowest id)
  int64_t top_k = 0;         // draw among the k most likely tokens only; 0: all
  uint64_t seed = 0;         // of the draws
  bool use_cache = true;
};

// Generates after prompt (non-empty; only its last `context` tokens are read), calling
// on_token(token, logits) with each new token and the logits [V] it was drawn from. Returns the
// generated tokens. Runs in evaluation mode without recording a graph. Throws ConfigError for
// an empty prompt, a bad option, or a model that cannot read running text.
std::vector<int64_t> generate(
    SequenceModel& model, int64_t context, const std::vector<int64_t>& prompt,
    const SamplingOptions& options,
    const std::function<void(int64_t token, const std::vector<float>& logits)>& on_token = {});

// The token drawn from logits [V] under options (temperature, top_k), using gen.
int64_t sample_token(const std::vector<float>& logits, const SamplingOptions& options,
                     Generator& gen);

}  // namespace gradlab::nn
