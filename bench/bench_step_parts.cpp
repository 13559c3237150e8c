// The training step's work one piece at a time, on the default copy model's shapes
// (bench_shared.h: batch 64 x 20 tokens, d_model 64, 4 heads, d_ff 256, vocabulary 12), each
// piece's operands hot in cache from the iteration before:
//   step_parts/product/*   each matrix product of the linear layers as the model runs them (Q, K
//                          and V stacked into one), through kernels::gemm
//   step_parts/<op>        every other op, forward and backward
// Added up, these are what the step would cost if nothing ever waited on memory and the engine
// cost nothing between ops: the floor under train_step/copy_default. The counter `per_step` is
// how many times a step runs the piece; multiply before adding up.
//
// The backward of an op whose input is a leaf copies the first gradient into the leaf (the
// engine's rule, engine.cpp), which the step's activations do not pay: one copy of the input,
// a few percent of each op here.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "autograd/attention.h"
#include "autograd/kernels/gemm.h"
#include "autograd/ops.h"
#include "bench/bench_shared.h"
#include "train/optimizer.h"

namespace {

namespace gb = gradlab_bench;
using gradlab::Tensor;

constexpr gb::CopySpec kSpec{};
constexpr int64_t kRows = kSpec.batch * kSpec.seq;  // N

Tensor leaf(const char* name, const gradlab::Shape& shape) {
  Tensor t = Tensor::from_vector(gb::normal_values(name, gradlab::numel(shape), 1.0), shape);
  t.set_requires_grad();
  return t;
}

// y = op(inputs), then y.backward(upstream), per iteration.
template <class Op>
void forward_backward(benchmark::State& state, std::vector<Tensor> inputs, const Op& op,
                      int64_t per_step) {
  const Tensor first = op(inputs);
  const Tensor upstream = Tensor::from_vector(
      gb::normal_values("step_parts/upstream", first.numel(), 1.0), first.shape());
  for (auto _ : state) {
    for (Tensor& t : inputs) t.zero_grad();
    op(inputs).backward(upstream);
    benchmark::DoNotOptimize(inputs.front().grad().data<float>());
    benchmark::ClobberMemory();
  }
  state.counters["per_step"] = static_cast<double>(per_step);
}

void BM_Gelu(benchmark::State& state) {
  forward_backward(
      state, {leaf("gelu/x", {kRows, kSpec.d_ff})},
      [](const std::vector<Tensor>& x) { return gradlab::gelu(x[0]); }, kSpec.layers);
}

void BM_LayerNorm(benchmark::State& state) {
  const int64_t C = kSpec.d_model;
  forward_backward(
      state, {leaf("ln/x", {kRows, C}), leaf("ln/w", {C}), leaf("ln/b", {C})},
      [](const std::vector<Tensor>& x) {
        return gradlab::layer_norm(x[0], x[1], x[2], kSpec.ln_eps);
      },
      2 * kSpec.layers + 1);
}

// Causal self-attention on the packed projection [B, T, 3H, D], weights not kept: what
// MultiHeadAttention::forward runs between its two projections.
void BM_Attention(benchmark::State& state) {
  const int64_t H = kSpec.heads, D = kSpec.d_model / H;
  forward_backward(
      state, {leaf("attention/qkv", {kSpec.batch, kSpec.seq, 3 * H, D})},
      [](const std::vector<Tensor>& x) {
        const int64_t heads = kSpec.heads;
        const double scale = 1.0 / std::sqrt(static_cast<double>(kSpec.d_model / heads));
        return gradlab::fused_attention_packed(x[0], heads, heads, {.causal = true}, scale, false)
            .output;
      },
      kSpec.layers);
}

// Residual connections: two per block.
void BM_ResidualAdd(benchmark::State& state) {
  const int64_t C = kSpec.d_model;
  forward_backward(
      state, {leaf("add/x", {kRows, C}), leaf("add/y", {kRows, C})},
      [](const std::vector<Tensor>& x) { return x[0] + x[1]; }, 2 * kSpec.layers);
}

// The loss over the copied half of every sequence; the other positions are ignored.
void BM_CrossEntropy(benchmark::State& state) {
  std::vector<int64_t> targets(static_cast<size_t>(kRows));
  for (int64_t i = 0; i < kRows; ++i) {
    const bool copied = i % kSpec.seq >= kSpec.seq - kSpec.length;
    targets[static_cast<size_t>(i)] = copied ? 1 + i % kSpec.num_symbols : gb::kIgnore;
  }
  const gradlab::Indices ids({kSpec.batch, kSpec.seq}, targets);
  forward_backward(
      state, {leaf("ce/logits", {kSpec.batch, kSpec.seq, kSpec.vocab})},
      [&](const std::vector<Tensor>& x) { return gradlab::cross_entropy(x[0], ids, gb::kIgnore); },
      1);
}

// Token and position embeddings, added: the model's input.
void BM_Embeddings(benchmark::State& state) {
  std::vector<int64_t> tokens(static_cast<size_t>(kRows)), positions(static_cast<size_t>(kRows));
  for (int64_t i = 0; i < kRows; ++i) {
    tokens[static_cast<size_t>(i)] = i % kSpec.vocab;
    positions[static_cast<size_t>(i)] = i % kSpec.seq;
  }
  const gradlab::Indices token_ids({kSpec.batch, kSpec.seq}, tokens);
  const gradlab::Indices position_ids({kSpec.batch, kSpec.seq}, positions);
  forward_backward(
      state,
      {leaf("embed/tokens", {kSpec.vocab, kSpec.d_model}),
       leaf("embed/positions", {kSpec.max_len, kSpec.d_model})},
      [&](const std::vector<Tensor>& x) {
        return gradlab::embedding(x[0], token_ids) + gradlab::embedding(x[1], position_ids);
      },
      1);
}

// Gradient clipping and one AdamW update of every parameter of the model.
void BM_ClipAndAdamW(benchmark::State& state) {
  std::vector<gradlab::nn::NamedTensor> params;
  Tensor loss;
  for (const gb::ParamSpec& p : gb::model_params(kSpec)) {
    Tensor t = leaf(p.name.c_str(), p.shape);
    params.emplace_back(p.name, t);
    const Tensor term = gradlab::sum(t * t);
    loss = loss.defined() ? loss + term : term;
  }
  loss.backward();  // gradients to clip and apply, kept from one iteration to the next
  std::vector<Tensor> tensors;
  for (const auto& [name, t] : params) tensors.push_back(t);
  const auto optimizer = gradlab::train::make_optimizer({}, params);
  for (auto _ : state) {
    gradlab::train::clip_grad_norm(tensors, kSpec.clip);
    optimizer->step(kSpec.lr);
    benchmark::ClobberMemory();
  }
  state.counters["per_step"] = 1;
}

// One linear-layer product, [m, k] @ [k, n] with the transposes the layer uses.
struct Product {
  const char* name;
  int64_t m, n, k;
  bool transposed_a, transposed_b;
  int64_t per_step;
};

void BM_Product(benchmark::State& state, Product p) {
  const std::vector<float> a = gb::normal_values("step_parts/product/a", p.m * p.k, 1.0);
  const std::vector<float> b = gb::normal_values("step_parts/product/b", p.k * p.n, 1.0);
  std::vector<float> c(static_cast<size_t>(p.m * p.n));
  for (auto _ : state) {
    gradlab::kernels::gemm<float>(p.m, p.n, p.k,
                                  {a.data(), p.transposed_a ? p.m : p.k, p.transposed_a},
                                  {b.data(), p.transposed_b ? p.k : p.n, p.transposed_b}, c.data(),
                                  p.n, false, nullptr, false);
    benchmark::ClobberMemory();
  }
  state.counters["per_step"] = static_cast<double>(p.per_step);
  state.counters["FLOPS"] = benchmark::Counter(
      2.0 * static_cast<double>(p.m * p.n * p.k) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

// A linear layer [in] -> [out] on the step's rows: forward x W^T, dX = dY W, dW = dY^T x.
void register_linear(const std::string& name, int64_t in, int64_t out, int64_t per_step) {
  const Product products[] = {{"forward", kRows, out, in, false, true, per_step},
                              {"input_grad", kRows, in, out, false, false, per_step},
                              {"weight_grad", out, in, kRows, true, false, per_step}};
  for (const Product& p : products) {
    benchmark::RegisterBenchmark(("step_parts/product/" + name + "_" + p.name).c_str(), BM_Product,
                                 p)
        ->Unit(benchmark::kMicrosecond)
        ->UseRealTime();
  }
}

void register_part(const char* name, void (*fn)(benchmark::State&)) {
  benchmark::RegisterBenchmark(name, fn)->Unit(benchmark::kMicrosecond)->UseRealTime();
}

[[maybe_unused]] const bool step_parts_registered = [] {
  const int64_t C = kSpec.d_model;
  register_linear("qkv", C, 3 * C, kSpec.layers);
  register_linear("attention_out", C, C, kSpec.layers);
  register_linear("fc1", C, kSpec.d_ff, kSpec.layers);
  register_linear("fc2", kSpec.d_ff, C, kSpec.layers);
  register_linear("head", C, kSpec.vocab, 1);
  register_part("step_parts/gelu", BM_Gelu);
  register_part("step_parts/layer_norm", BM_LayerNorm);
  register_part("step_parts/attention", BM_Attention);
  register_part("step_parts/residual_add", BM_ResidualAdd);
  register_part("step_parts/cross_entropy", BM_CrossEntropy);
  register_part("step_parts/embeddings", BM_Embeddings);
  register_part("step_parts/clip_and_adamw", BM_ClipAndAdamW);
  return true;
}();

}  // namespace
