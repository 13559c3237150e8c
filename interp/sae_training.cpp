// The sparse autoencoder's training loop: steps, dead features and their resampling.
#include "interp/sae_training.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"
#include "autograd/ops.h"

namespace gradlab::interp {
namespace {

// Bricken et al.: a resampled feature's encoder column is 0.2 of the live columns' mean norm.
constexpr double kResampledEncoderScale = 0.2;

// Values of a parameter-shaped tensor, edited and written back in place.
struct Edited {
  explicit Edited(Tensor t) : tensor(std::move(t)), values(tensor.to_vector()) {}
  void write() { tensor.copy_from(Tensor::from_vector(values, tensor.shape(), tensor.dtype())); }
  Tensor tensor;
  std::vector<double> values;
};

// Zeroes, in a tensor shaped like the parameter `name`, what belongs to feature f: row f of W_dec
// [F, C], column f of W_enc [C, F], entry f of b_enc [F].
void clear_feature(const std::string& name, Edited& t, int64_t f, int64_t d_in, int64_t d_sae) {
  if (name == "W_dec") {
    std::fill_n(t.values.begin() + f * d_in, d_in, 0.0);
  } else if (name == "W_enc") {
    for (int64_t c = 0; c < d_in; ++c) t.values[static_cast<size_t>(c * d_sae + f)] = 0.0;
  } else if (name == "b_enc") {
    t.values[static_cast<size_t>(f)] = 0.0;
  }
}

void resample(Sae& sae, const std::vector<int64_t>& dead, const Tensor& x, const SaeOutput& out,
              const SaeOptimizer& optimizer) {
  const int64_t d_in = sae.config().d_in, d_sae = sae.config().d_sae, rows = x.size(0);
  const std::vector<double> inputs = x.to_vector(), rebuilt = out.reconstruction.to_vector();
  std::vector<double> error(static_cast<size_t>(rows), 0.0);
  for (int64_t i = 0; i < rows * d_in; ++i) {
    const double e = inputs[i] - rebuilt[i];
    error[static_cast<size_t>(i / d_in)] += e * e;
  }
  std::vector<int64_t> worst(static_cast<size_t>(rows));
  std::iota(worst.begin(), worst.end(), 0);
  std::stable_sort(worst.begin(), worst.end(),
                   [&](int64_t a, int64_t b) { return error[a] > error[b]; });

  NoGradGuard no_grad;
  Edited w_enc(sae.W_enc), b_enc(sae.b_enc), w_dec(sae.W_dec);
  const std::vector<double> b_dec = sae.b_dec.to_vector();
  std::vector<bool> is_dead(static_cast<size_t>(d_sae), false);
  for (const int64_t f : dead) is_dead[static_cast<size_t>(f)] = true;
  double live_norm = 0;
  int64_t live = 0;
  for (int64_t f = 0; f < d_sae; ++f) {
    if (is_dead[static_cast<size_t>(f)]) continue;
    double norm = 0;
    for (int64_t c = 0; c < d_in; ++c) norm += std::pow(w_enc.values[c * d_sae + f], 2);
    live_norm += std::sqrt(norm);
    ++live;
  }
  const double encoder_norm = kResampledEncoderScale * (live > 0 ? live_norm / live : 1.0);
  for (size_t n = 0; n < dead.size(); ++n) {
    const int64_t f = dead[n], row = worst[n % worst.size()];
    std::vector<double> direction(static_cast<size_t>(d_in));
    double norm = 0;
    for (int64_t c = 0; c < d_in; ++c) {
      direction[c] = inputs[row * d_in + c] - b_dec[c];
      norm += direction[c] * direction[c];
    }
    norm = std::sqrt(norm);
    if (norm == 0) continue;  // an input at b_dec points nowhere: the feature stays as it is
    for (int64_t c = 0; c < d_in; ++c) {
      w_dec.values[f * d_in + c] = direction[c] / norm;
      w_enc.values[c * d_sae + f] = direction[c] / norm * encoder_norm;
    }
    b_enc.values[static_cast<size_t>(f)] = 0;
  }
  w_enc.write();
  b_enc.write();
  w_dec.write();
  for (auto& [name, slot] : optimizer.state()) {
    Edited state(slot);
    const std::string parameter = name.substr(0, name.find('/'));
    for (const int64_t f : dead) clear_feature(parameter, state, f, d_in, d_sae);
    state.write();
  }
}

}  // namespace

SaeBatchMetrics batch_metrics(const SaeOutput& out, const Tensor& x) {
  SaeBatchMetrics m;
  m.loss = out.loss.item();
  m.mse = out.mse.item();
  m.l1 = out.l1.item();
  const int64_t rows = x.size(0), width = x.size(1);
  const std::vector<double> f = out.features.to_vector();
  m.l0 = static_cast<double>(std::count_if(f.begin(), f.end(), [](double v) { return v > 0; })) /
         static_cast<double>(rows);
  const std::vector<double> v = x.to_vector();
  std::vector<double> centre(static_cast<size_t>(width), 0.0);
  for (int64_t i = 0; i < rows * width; ++i) centre[i % width] += v[i] / rows;
  double spread = 0;
  for (int64_t i = 0; i < rows * width; ++i) spread += std::pow(v[i] - centre[i % width], 2);
  const double residual = m.mse * rows;
  m.explained_variance = spread > 0 ? 1.0 - residual / spread : 0.0;
  return m;
}

void train_sae(Sae& sae, const std::function<Tensor(int64_t step)>& activations,
               const SaeOptimizer& optimizer, const SaeTrainingOptions& options,
               const std::function<void(const SaeStepLog&)>& log) {
  if (options.steps < 1) throw ConfigError("sae: steps must be at least 1");
  if (options.log_every < 1) throw ConfigError("sae: log_every must be at least 1");
  if (options.dead_window < 1) throw ConfigError("sae: dead_window must be at least 1");
  if (options.resample_every < 0) throw ConfigError("sae: resample_every must be >= 0");
  const int64_t d_sae = sae.config().d_sae;
  std::vector<int64_t> idle(static_cast<size_t>(d_sae), 0);  // steps since each feature fired
  for (int64_t step = 1; step <= options.steps; ++step) {
    const Tensor x = activations(step).to(sae.W_dec.dtype());
    sae.zero_grad();
    const SaeOutput out = sae.forward(x);
    out.loss.backward();
    SaeStepLog row;
    row.step = step;
    const bool logged = step % options.log_every == 0 || step == options.steps;
    if (logged) row.batch = batch_metrics(out, x);
    const std::vector<double> f = out.features.to_vector();
    std::vector<bool> fired(static_cast<size_t>(d_sae), false);
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i] > 0) fired[i % static_cast<size_t>(d_sae)] = true;
    }
    for (int64_t k = 0; k < d_sae; ++k) idle[k] = fired[k] ? 0 : idle[k] + 1;
    sae.remove_parallel_gradient();
    optimizer.step(options.lr);
    sae.normalize_decoder();
    std::vector<int64_t> dead;
    for (int64_t k = 0; k < d_sae; ++k) {
      if (idle[k] >= options.dead_window) dead.push_back(k);
    }
    row.dead = static_cast<int64_t>(dead.size());
    if (options.resample_every > 0 && step % options.resample_every == 0 && step < options.steps &&
        !dead.empty()) {
      resample(sae, dead, x, out, optimizer);
      for (const int64_t k : dead) idle[k] = 0;
      row.resampled = row.dead;
    }
    if (logged && log) log(row);
  }
}

}  // namespace gradlab::interp
