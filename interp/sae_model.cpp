// A sparse autoencoder on a trained model: its inputs, training stream, evaluation and features.
#include "interp/sae_model.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <numeric>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"
#include "autograd/matmul.h"
#include "autograd/ops.h"
#include "autograd/shape_ops.h"
#include "interp/direct_logit_attribution.h"
#include "nn/hooks.h"

namespace gradlab::interp {
namespace {

int64_t counted_targets(const nn::SequenceBatch& batch) {
  return static_cast<int64_t>(std::count_if(batch.targets.values.begin(),
                                            batch.targets.values.end(),
                                            [](int64_t t) { return t != nn::kIgnoreTarget; }));
}

double loss_with(const nn::SequenceModel& model, const nn::SequenceBatch& batch,
                 const std::vector<nn::Hook>& hooks) {
  return sequence_loss(run_with_hooks(model, batch, hooks), batch).item();
}

// Sums over rows, turned into SaeEvaluation's means at the end.
struct Totals {
  int64_t rows = 0, targets = 0;
  double mse = 0, l1 = 0, active = 0, clean = 0, zero = 0, spliced = 0;
  std::vector<double> sum, square;  // per input dimension
  std::vector<bool> fired;
};

// The unembedding with the final norm's weight folded in, or as it is for a norm that cannot be
// folded.
Unembedding folded_unembedding(const nn::SequenceModel& model) {
  try {
    return unembedding(model, true);
  } catch (const ConfigError&) {
    return unembedding(model, false);
  }
}

}  // namespace

Tensor sae_inputs(const nn::SequenceModel& model, const nn::SequenceBatch& batch,
                  const std::string& point) {
  NoGradGuard no_graph;
  const nn::ActivationCache cache =
      run_with_cache(model, batch, nn::HookFilter(point), {.logits = false});
  const Tensor x = cache.at(point);
  if (x.rank() != 3) {
    throw ConfigError("sae: " + point + " is " + to_string(x.shape()) +
                      ": an SAE reads a point of shape [B, T, C]");
  }
  return reshape(x, {x.size(0) * x.size(1), x.size(2)});
}

void check_sae_fits(const nn::SequenceModel& model, const Sae& sae, const nn::SequenceBatch& batch,
                    const std::string& what) {
  const SaeConfig& c = sae.config();
  const uint64_t fingerprint = model_fingerprint(model);
  if (fingerprint != c.model_fingerprint) {
    throw ConfigError(what + ": trained on another model (" + quote(c.checkpoint) +
                      ", parameters' fingerprint " + std::to_string(c.model_fingerprint) +
                      "; this model's " + std::to_string(fingerprint) + ")");
  }
  const Tensor x = sae_inputs(model, rows_of(batch, 0, 1), c.hook);
  if (x.size(1) != c.d_in) {
    throw ConfigError(what + ": d_in " + format_number(c.d_in) + " but " + c.hook + " is " +
                      format_number(x.size(1)) + " wide");
  }
}

SaeEvaluation evaluate_sae(const nn::SequenceModel& model, const Sae& sae,
                           const nn::SequenceBatch& set, int64_t rows_per_pass) {
  NoGradGuard no_graph;
  const std::string& point = sae.config().hook;
  const int64_t width = sae.config().d_in;
  Totals t;
  t.sum.assign(static_cast<size_t>(width), 0.0);
  t.square.assign(static_cast<size_t>(width), 0.0);
  t.fired.assign(static_cast<size_t>(sae.config().d_sae), false);
  const nn::Hook zero{point, [](const Tensor& x, const std::string&) { return x * 0.0; }};
  const nn::Hook splice{point,
                        [&sae](const Tensor& x, const std::string&) { return sae.reconstruct(x); }};
  const int64_t sequences = set.inputs.shape.at(0);
  for (int64_t first = 0; first < sequences; first += rows_per_pass) {
    const nn::SequenceBatch batch = rows_of(set, first, std::min(rows_per_pass, sequences - first));
    const Tensor x = sae_inputs(model, batch, point);
    const SaeOutput out = sae.forward(x.to(sae.W_dec.dtype()));
    const int64_t rows = x.size(0);
    t.rows += rows;
    t.mse += out.mse.item() * rows;
    t.l1 += out.l1.item() * rows;
    const std::vector<double> f = out.features.to_vector(), v = x.to_vector();
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] > 0) {
        t.active += 1;
        t.fired[i % t.fired.size()] = true;
      }
    }
    for (size_t i = 0; i < v.size(); ++i) {
      t.sum[i % t.sum.size()] += v[i];
      t.square[i % t.sum.size()] += v[i] * v[i];
    }
    const int64_t targets = counted_targets(batch);
    if (targets == 0) continue;
    t.targets += targets;
    t.clean += loss_with(model, batch, {}) * static_cast<double>(targets);
    t.zero += loss_with(model, batch, {zero}) * static_cast<double>(targets);
    t.spliced += loss_with(model, batch, {splice}) * static_cast<double>(targets);
  }
  SaeEvaluation e;
  e.inputs = t.rows;
  const double rows = static_cast<double>(std::max<int64_t>(t.rows, 1));
  e.metrics.mse = t.mse / rows;
  e.metrics.l1 = t.l1 / rows;
  e.metrics.loss = sae.config().top_k > 0
                       ? e.metrics.mse
                       : e.metrics.mse + sae.config().l1_coefficient * e.metrics.l1;
  e.metrics.l0 = t.active / rows;
  double spread = 0;
  for (size_t c = 0; c < t.sum.size(); ++c) spread += t.square[c] - t.sum[c] * t.sum[c] / rows;
  e.metrics.explained_variance = spread > 0 ? 1.0 - t.mse / spread : 0.0;
  const double targets = static_cast<double>(std::max<int64_t>(t.targets, 1));
  e.ce_clean = t.clean / targets;
  e.ce_zero = t.zero / targets;
  e.ce_sae = t.spliced / targets;
  e.ce_score = e.ce_zero != e.ce_clean ? (e.ce_zero - e.ce_sae) / (e.ce_zero - e.ce_clean)
                                       : std::numeric_limits<double>::quiet_NaN();
  e.dead = std::count(t.fired.begin(), t.fired.end(), false);
  return e;
}

const char* const kSaeLogHeader =
    "step,loss,mse,l1,l0,explained_variance,dead_features,resampled,heldout_mse,heldout_l0,"
    "heldout_explained_variance,ce_clean,ce_zero_ablated,ce_with_sae,ce_loss_score";

void write_sae_log_row(std::ostream& out, const SaeStepLog& s, const SaeEvaluation& h) {
  out << std::setprecision(8) << s.step << ',' << s.batch.loss << ',' << s.batch.mse << ','
      << s.batch.l1 << ',' << s.batch.l0 << ',' << s.batch.explained_variance << ',' << s.dead
      << ',' << s.resampled << ',' << h.metrics.mse << ',' << h.metrics.l0 << ','
      << h.metrics.explained_variance << ',' << h.ce_clean << ',' << h.ce_zero << ',' << h.ce_sae
      << ',' << h.ce_score << '\n';
  out.flush();
}

void train_sae_on_model(
    const nn::SequenceModel& model, Sae& sae,
    const std::function<nn::SequenceBatch(int64_t step)>& training_batch,
    const nn::SequenceBatch& heldout, int64_t rows_per_pass, const SaeOptimizer& optimizer,
    const SaeTrainingOptions& options, std::ostream& log,
    const std::function<void(const SaeStepLog&, const SaeEvaluation&)>& report) {
  log << kSaeLogHeader << '\n';
  train_sae(
      sae, [&](int64_t step) { return sae_inputs(model, training_batch(step), sae.config().hook); },
      optimizer, options,
      [&](const SaeStepLog& step) {
        const SaeEvaluation heldout_eval = evaluate_sae(model, sae, heldout, rows_per_pass);
        write_sae_log_row(log, step, heldout_eval);
        if (report) report(step, heldout_eval);
      });
}

std::vector<FeatureSummary> sae_features(const nn::SequenceModel& model, const Sae& sae,
                                         const nn::SequenceBatch& set, int64_t rows_per_pass,
                                         int64_t top_examples, int64_t top_tokens) {
  NoGradGuard no_graph;
  const int64_t features = sae.config().d_sae;
  std::vector<FeatureSummary> out(static_cast<size_t>(features));
  std::vector<int64_t> active(static_cast<size_t>(features), 0);
  const int64_t sequences = set.inputs.shape.at(0), positions = set.inputs.shape.at(1);
  int64_t rows = 0;
  for (int64_t first = 0; first < sequences; first += rows_per_pass) {
    const nn::SequenceBatch batch = rows_of(set, first, std::min(rows_per_pass, sequences - first));
    const Tensor x = sae_inputs(model, batch, sae.config().hook);
    const std::vector<double> f = sae.encode(x.to(sae.W_dec.dtype())).to_vector();
    for (int64_t r = 0; r < x.size(0); ++r) {
      for (int64_t k = 0; k < features; ++k) {
        const double a = f[static_cast<size_t>(r * features + k)];
        if (a <= 0) continue;
        ++active[k];
        std::vector<FeatureExample>& top = out[k].top;
        top.push_back({first + r / positions, r % positions, a});
        std::stable_sort(top.begin(), top.end(), [](const auto& a1, const auto& a2) {
          return a1.activation > a2.activation;
        });
        if (static_cast<int64_t>(top.size()) > top_examples) top.pop_back();
      }
    }
    rows += x.size(0);
  }
  const Unembedding u = folded_unembedding(model);
  const bool residual_width = u.weight.size(0) == sae.config().d_in;
  const std::vector<double> effect =
      residual_width ? matmul(sae.W_dec, u.weight.to(sae.W_dec.dtype())).to_vector()
                     : std::vector<double>{};
  const int64_t vocab = u.weight.size(1);
  for (int64_t k = 0; k < features; ++k) {
    out[k].feature = k;
    out[k].frequency =
        static_cast<double>(active[k]) / static_cast<double>(std::max<int64_t>(rows, 1));
    if (!residual_width) continue;
    std::vector<int64_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    const double* row = effect.data() + k * vocab;
    const int64_t shown = std::min(top_tokens, vocab);
    std::partial_sort(order.begin(), order.begin() + shown, order.end(),
                      [row](int64_t a, int64_t b) { return row[a] > row[b]; });
    for (int64_t i = 0; i < shown; ++i) out[k].logit_effect.emplace_back(order[i], row[order[i]]);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.frequency > b.frequency; });
  return out;
}

}  // namespace gradlab::interp
