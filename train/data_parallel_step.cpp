// The data-parallel part of a training step (trainer.h): a process's share of the batch (when a
// group of processes trains), split into shares that run on threads, their gradients summed in
// share order, then across the group; and the replicas' state compared by hash. The one-process
// evaluation is trainer.cpp's.
#include <algorithm>
#include <array>
#include <chrono>
#include <span>
#include <type_traits>

#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/layers.h"
#include "train/batch_rows.h"
#include "train/fingerprint.h"
#include "train/share_threads.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace {

// What the batch's loss is a mean over: the targets that count, or a model's of feature
// vectors (nn::SequenceBatch::features), the rows.
int64_t counted_targets(const nn::SequenceBatch& batch) {
  if (batch.features.defined()) return nn::rows_in(batch);
  return std::count_if(batch.targets.values.begin(), batch.targets.values.end(),
                       [](int64_t t) { return t != nn::kIgnoreTarget; });
}

// Whether nothing but this handle reaches t's values: no other handle to its node, no other
// node over its buffer.
bool exclusive(const Tensor& t) {
  return t.node().use_count() == 1 && t.node()->storage.use_count() == 1;
}

// One parameter's gradient as the sum of terms (a gradient it held before the step, then the
// shares' in share order), added element by element into out.
template <class T>
struct GradientSum {
  T* out;
  std::array<const T*, kBatchShares + 1> terms;
  size_t count;
  int64_t n;
};

template <class T>
void add_part(const GradientSum<T>& sum, int64_t part) {
  const auto [begin, end] = parameter_part(sum.n, part);
  for (int64_t i = begin; i < end; ++i) sum.out[i] = sum.terms[0][i] + sum.terms[1][i];
  for (size_t k = 2; k < sum.count; ++k) {
    for (int64_t i = begin; i < end; ++i) sum.out[i] += sum.terms[k][i];
  }
}

// Every parameter's gradient: the one it held, plus the shares' (taken out of `gradients`),
// summed part by part (share_threads.h).
void sum_shares(std::vector<Tensor> params, std::vector<LeafGradients>& gradients) {
  // In share order, whichever thread computed which: the same sums on any number of threads.
  // The sum goes into the first term's buffer when nothing else holds it (a share's gradient for
  // this parameter alone, as a rule), else into a new one; `terms` keeps the others alive.
  std::vector<Tensor> terms;
  std::vector<GradientSum<float>> f32;
  std::vector<GradientSum<double>> f64;
  int64_t elements = 0;
  for (Tensor& p : params) {
    std::array<Tensor, kBatchShares + 1> own;
    size_t count = 0;
    if (p.grad().defined()) own[count++] = p.grad();
    for (LeafGradients& share : gradients) {
      Tensor grad = share.take(p);
      if (grad.defined()) own[count++] = std::move(grad);
    }
    if (count == 0) continue;
    if (count == 1) {
      p.set_grad(exclusive(own[0]) ? own[0] : own[0].clone());
      continue;
    }
    Tensor sum = exclusive(own[0]) ? own[0] : Tensor::empty(p.shape(), p.dtype());
    dispatch(p.dtype(), [&]<class T>() {
      GradientSum<T> s{sum.mutable_data<T>(), {}, count, p.numel()};
      for (size_t k = 0; k < count; ++k) s.terms[k] = own[k].data<T>();
      if constexpr (std::is_same_v<T, float>) {
        f32.push_back(s);
      } else {
        f64.push_back(s);
      }
    });
    for (size_t k = 0; k < count; ++k) terms.push_back(std::move(own[k]));
    p.set_grad(sum);
    elements += p.numel();
  }
  for_parameter_parts(elements, [&](int64_t part) {
    for (const auto& sum : f32) add_part(sum, part);
    for (const auto& sum : f64) add_part(sum, part);
  });
}

uint64_t hash_tensors(const std::vector<nn::NamedTensor>& tensors, uint64_t hash) {
  for (const auto& [name, t] : tensors) {
    hash = fingerprint(name.data(), name.size(), hash);
    hash = fingerprint(t.node()->storage->data(),
                       static_cast<size_t>(t.numel()) * dtype_size(t.dtype()), hash);
  }
  return hash;
}

}  // namespace

void Trainer::distribute(ProcessGroup& group) {
  const int64_t rows = nn::rows_in(data_->training_batch(1));
  if (group.size() > rows) {
    throw ConfigError("--batch-size " + std::to_string(rows) + " is smaller than the " +
                      std::to_string(group.size()) +
                      " processes training it: every process needs a row of each batch");
  }
  for (const auto& [name, p] : model_->named_parameters()) {
    if (p.dtype() != DType::Float32) {
      throw ConfigError("training on several processes needs float32 parameters; " + name + " is " +
                        dtype_name(p.dtype()));
    }
  }
  group_ = &group;
}

void Trainer::backward_shares(const nn::SequenceBatch& batch, StepResult& result) {
  const auto [begin, end] = share_of(nn::rows_in(batch), *group_);
  const int64_t shares = std::min(kBatchShares, end - begin);
  const int64_t counted = counted_targets(batch);
  // Each share draws its masks from a stream of its own, seeded by the shared generator's next
  // draw and the share's first row in the whole batch (distinct for every share of every
  // process, whatever each process's number of shares); the shared generator itself only moves
  // on by that draw, on every process.
  const uint64_t draw = model_->dropout_gen->next_u64();
  std::vector<LeafGradients> gradients(static_cast<size_t>(shares));
  std::vector<double> losses(static_cast<size_t>(shares), 0.0);
  auto run_share = [&](int64_t s) {
    const int64_t first = begin + (end - begin) * s / shares;
    const nn::SequenceBatch share =
        nn::rows_of(batch, first, begin + (end - begin) * (s + 1) / shares - first);
    const double weight = counted > 0 ? static_cast<double>(counted_targets(share)) / counted : 0;
    if (weight == 0) return;
    Generator stream(draw + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(first + 1));
    const nn::DropoutStream masks(stream);
    const LeafGradientScope collect(gradients[static_cast<size_t>(s)]);
    const Tensor loss = model_->loss(share) * weight;
    loss.backward();
    losses[static_cast<size_t>(s)] = loss.item();
  };
  run_pieces(shares, run_share);
  // In share order, whichever thread computed which: the same sums on any number of threads.
  double loss_part = 0;
  for (double loss : losses) loss_part += loss;
  sum_shares(model_->parameters(), gradients);
  if (group_->size() > 1) {
    const auto start = std::chrono::steady_clock::now();
    sum_gradients();
    group_->sum(std::span<double>(&loss_part, 1));
    result.sync_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  result.loss = loss_part;
}

void Trainer::sum_gradients() {
  std::vector<Tensor> params = model_->parameters();
  size_t total = 0;
  for (const Tensor& p : params) total += static_cast<size_t>(p.numel());
  gradient_buffer_.resize(total);
  float* flat = gradient_buffer_.data();
  for (const Tensor& p : params) {
    const Tensor grad = p.grad();
    if (grad.defined()) {
      std::copy_n(grad.data<float>(), p.numel(), flat);
    } else {
      std::fill_n(flat, p.numel(), 0.0f);
    }
    flat += p.numel();
  }
  // A few large messages rather than one per parameter: each all-reduce pays a latency.
  constexpr size_t kBucket = size_t{1} << 22;
  for (size_t start = 0; start < total; start += kBucket) {
    group_->sum(
        std::span<float>(gradient_buffer_.data() + start, std::min(kBucket, total - start)));
  }
  flat = gradient_buffer_.data();
  for (Tensor& p : params) {
    Tensor grad = Tensor::empty(p.shape());
    std::copy_n(flat, p.numel(), grad.mutable_data<float>());
    p.set_grad(grad);
    flat += p.numel();
  }
}

uint64_t Trainer::state_hash() const {
  uint64_t hash = hash_tensors(model_->named_parameters(), kFingerprintStart);
  hash = hash_tensors(optimizer_->state(), hash);
  const std::array<int64_t, 2> steps = {step_, optimizer_->steps()};
  hash = fingerprint(steps.data(), sizeof steps, hash);
  const auto dropout = model_->dropout_gen->state();
  return fingerprint(dropout.data(), sizeof dropout, hash);
}

void Trainer::check_replicas() {
  const std::vector<uint64_t> hashes = group_->gather(state_hash());
  std::string differ;
  for (size_t r = 1; r < hashes.size(); ++r) {
    if (hashes[r] != hashes[0]) differ += (differ.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!differ.empty()) {
    throw ReplicaMismatch(
        "after step " + std::to_string(step_) + " the model or optimizer state of rank" +
        (differ.find(',') == std::string::npos ? " " : "s ") + differ + " differs from rank 0's");
  }
}

}  // namespace gradlab::train
