// The logit lens from the hook points' residual stream.
#include "interp/logit_lens.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"
#include "nn/hooks.h"

namespace gradlab::interp {
namespace {

constexpr const char* kResidPre = ".hook_resid_pre";
constexpr const char* kResidPost = ".hook_resid_post";

// The decoder stack's blocks: "blocks.<i>" (decoder-only) or "decoder.<i>" (encoder-decoder);
// the encoder's residual never reaches the head.
bool decoder_stack(const std::string& name) {
  return name.starts_with("blocks.") || name.starts_with("decoder.");
}

bool lens_point(const std::string& name) {
  return (name == std::string("blocks.0") + kResidPre) ||
         (name == std::string("decoder.0") + kResidPre) ||
         (decoder_stack(name) && name.ends_with(kResidPost));
}

// softmax of one row of logits, in double.
std::vector<double> softmax_row(const double* logits, size_t vocab) {
  const double largest = *std::max_element(logits, logits + vocab);
  std::vector<double> p(vocab);
  double sum = 0;
  for (size_t v = 0; v < vocab; ++v) sum += p[v] = std::exp(logits[v] - largest);
  for (double& value : p) value /= sum;
  return p;
}

}  // namespace

std::vector<LensLayer> logit_lens(const nn::SequenceModel& model, const nn::SequenceBatch& batch) {
  const nn::ActivationCache cache =
      run_with_cache(model, batch, nn::HookFilter(lens_point, "the residual stream of each block"),
                     {.logits = false});
  NoGradGuard no_grad;
  std::vector<LensLayer> layers;
  for (const std::string& name : cache.names()) {
    const bool entering = name.ends_with(kResidPre);
    // unembed runs ln_f on this layer's residual, so LayerNorm's mean and variance are this
    // layer's own. Reusing the final layer's statistics (its scale, cached from the forward
    // pass) for earlier layers is a known way to get the logit lens wrong: the residual's norm
    // grows with depth, and earlier layers would be read at the wrong scale.
    layers.push_back({entering ? "embed" : name.substr(0, name.size() - std::strlen(kResidPost)),
                      model.unembed(cache.at(name))});  // [B, T, V]
  }
  return layers;
}

LensProbabilities lens_probabilities(const std::vector<LensLayer>& lens, const Indices& targets,
                                     int64_t top_k) {
  if (lens.empty() || targets.shape.size() != 2 || targets.shape[0] != 1) {
    throw ShapeError("lens_probabilities: one sequence's lens and targets [1, T], got targets " +
                     to_string(targets.shape));
  }
  const int64_t positions = targets.shape[1];
  const int64_t vocab = lens.front().logits.size(-1);
  if (top_k < 1 || top_k > vocab) {
    throw ConfigError("lens_probabilities: top_k " + format_number(top_k) + " is not in [1, " +
                      format_number(vocab) + "]");
  }
  LensProbabilities out;
  out.positions = positions;
  out.top_k = top_k;
  for (const LensLayer& layer : lens) {
    if (layer.logits.shape() != Shape{1, positions, vocab}) {
      throw ShapeError("lens_probabilities: " + layer.name + "'s logits " +
                       to_string(layer.logits.shape()) + " are not [1, " +
                       format_number(positions) + ", " + format_number(vocab) + "]");
    }
    out.layers.push_back(layer.name);
    const std::vector<double> logits = layer.logits.to_vector();  // [1, T, V]
    for (int64_t t = 0; t < positions; ++t) {
      const std::vector<double> p =
          softmax_row(logits.data() + t * vocab, static_cast<size_t>(vocab));
      const int64_t target = targets.values[static_cast<size_t>(t)];
      out.target_probability.push_back(target == nn::kIgnoreTarget
                                           ? std::numeric_limits<double>::quiet_NaN()
                                           : p.at(static_cast<size_t>(target)));
      std::vector<int64_t> order(static_cast<size_t>(vocab));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return p[static_cast<size_t>(a)] > p[static_cast<size_t>(b)];
      });
      for (int64_t k = 0; k < top_k; ++k) {
        out.top_tokens.push_back(order[static_cast<size_t>(k)]);
        out.top_probabilities.push_back(p[static_cast<size_t>(order[static_cast<size_t>(k)])]);
      }
    }
  }
  return out;
}

void LensReduction::add(const std::vector<LensLayer>& lens, const Indices& targets,
                        const std::vector<int64_t>& at) {
  const int64_t R = targets.shape.at(0), T = targets.shape.at(1);
  const int64_t P = at.empty() ? T : 1;
  if (sums_.layers.empty()) {
    for (const LensLayer& layer : lens) sums_.layers.push_back(layer.name);
    sums_.positions = P;
    sums_.target_probability.assign(lens.size() * static_cast<size_t>(P), 0.0);
    counts_.assign(static_cast<size_t>(P), 0);
  }
  if (P != sums_.positions || lens.size() != sums_.layers.size() ||
      (!at.empty() && static_cast<int64_t>(at.size()) != R)) {
    throw ShapeError("logit lens: a batch of " + format_number(T) + " positions and " +
                     format_number(static_cast<int64_t>(lens.size())) +
                     " layers where the first had " + format_number(sums_.positions) + " and " +
                     format_number(static_cast<int64_t>(sums_.layers.size())));
  }
  for (size_t l = 0; l < lens.size(); ++l) {
    const int64_t vocab = lens[l].logits.size(-1);
    if (lens[l].logits.shape() != Shape{R, T, vocab}) {
      throw ShapeError("logit lens: " + lens[l].name + "'s logits " +
                       to_string(lens[l].logits.shape()) + " are not [" + format_number(R) + ", " +
                       format_number(T) + ", V]");
    }
    const std::vector<double> logits = lens[l].logits.to_vector();  // [R, T, V]
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t p = 0; p < P; ++p) {
        const int64_t t = at.empty() ? p : at[static_cast<size_t>(r)];
        const int64_t target = targets.values[static_cast<size_t>(r * T + t)];
        if (target == nn::kIgnoreTarget) continue;
        const std::vector<double> probabilities =
            softmax_row(logits.data() + (r * T + t) * vocab, static_cast<size_t>(vocab));
        sums_.target_probability[l * static_cast<size_t>(P) + static_cast<size_t>(p)] +=
            probabilities.at(static_cast<size_t>(target));
        if (l == 0) ++counts_[static_cast<size_t>(p)];
      }
    }
  }
  sums_.rows += R;
}

LensMean LensReduction::mean() const {
  if (sums_.rows == 0) throw ConfigError("logit lens: no rows to reduce");
  LensMean out = sums_;
  const auto P = static_cast<size_t>(out.positions);
  for (size_t i = 0; i < out.target_probability.size(); ++i) {
    const int64_t count = counts_[i % P];
    out.target_probability[i] = count == 0 ? std::numeric_limits<double>::quiet_NaN()
                                           : out.target_probability[i] / static_cast<double>(count);
  }
  return out;
}

}  // namespace gradlab::interp
