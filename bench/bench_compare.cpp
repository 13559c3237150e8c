// The gradlab side of the libtorch comparison (bench/torch_bench.cpp is the other side): the
// same workload names, shapes, float32 values (bench_shared.h) and thread count.
//
//   mha_fwd_bwd/B*_T*_C*_H*   nn::MultiHeadAttention forward, loss = sum(out * upstream), backward
//   train_step/copy_default   one Trainer::train_step() of the default copy-task run
//   step_products/copy_default the matrix products of that step alone (bench_shared.h)
//   matmul/N*                 square float32 matmul, GFLOP/s in the FLOPS counter
//
// Each benchmark runs a fixed number of iterations after an untimed warm-up, so one process
// run costs about the same on both sides; scripts/bench.sh repeats whole process runs,
// alternating with libtorch, and reports the median. The counter `check` is a value both
// binaries compute from identical inputs (the loss of the first iteration), for the driver
// to compare.
#include <benchmark/benchmark.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/kernels/gemm.h"
#include "autograd/ops.h"
#include "bench/bench_shared.h"
#include "nn/attention.h"
#include "nn/module_registry.h"
#include "train/config.h"
#include "train/trainer.h"

namespace {

namespace gb = gradlab_bench;
using gradlab::Tensor;

void set_values(Tensor& parameter, const std::vector<float>& values) {
  parameter.copy_from(Tensor::from_vector(values, parameter.shape()));
}

void BM_Mha(benchmark::State& state, gb::MhaShape s) {
  gradlab::Generator gen(0);
  gradlab::nn::MultiHeadAttention mha(
      {.d_model = s.C, .num_heads = s.H, .num_kv_heads = 0, .bias = true, .dropout = 0.0}, gen);
  const gb::MhaData d = gb::mha_data(s);
  set_values(mha.q_proj->weight, d.wq);
  set_values(mha.q_proj->bias, d.bq);
  set_values(mha.k_proj->weight, d.wk);
  set_values(mha.k_proj->bias, d.bk);
  set_values(mha.v_proj->weight, d.wv);
  set_values(mha.v_proj->bias, d.bv);
  set_values(mha.out_proj->weight, d.wo);
  set_values(mha.out_proj->bias, d.bo);
  Tensor x = Tensor::from_vector(d.x, {s.B, s.T, s.C});
  x.set_requires_grad();
  const Tensor upstream = Tensor::from_vector(d.upstream, {s.B, s.T, s.C});
  std::vector<Tensor> leaves = mha.parameters();
  leaves.push_back(x);

  gradlab::nn::AttentionMasks masks;
  masks.causal = s.causal;
  auto iteration = [&] {
    for (Tensor& t : leaves) t.zero_grad();
    Tensor loss = gradlab::sum(mha.forward(x, masks) * upstream);
    loss.backward();
    return loss;
  };
  const double check = iteration().item();  // warm-up
  for (auto _ : state) {
    Tensor loss = iteration();
    const float* grad = x.grad().data<float>();
    benchmark::DoNotOptimize(grad);
    benchmark::ClobberMemory();
  }
  state.counters["check"] = check;
}

void BM_TrainStep(benchmark::State& state) {
  const gb::CopySpec spec;
  gradlab::train::RunConfig config;
  gradlab::train::finalize(config);
  // The libtorch side hard-codes these; fail loudly if gradlab's defaults move away from them.
  const auto& n = config.net;
  if (config.model != spec.model || config.task.name != spec.task || n.d_model != spec.d_model ||
      n.attention.num_heads != spec.heads || n.num_layers != spec.layers ||
      n.feed_forward.d_ff != spec.d_ff || n.vocab_size != spec.vocab || n.max_len != spec.max_len ||
      n.dropout != 0.0 || !n.block.pre_norm ||
      gradlab::nn::position_scheme_name(n.embedding) != gradlab::nn::kLearnedPositions ||
      n.attention.score_modifier != gradlab::nn::kNoScoreModifier ||
      config.batch_size != spec.batch || config.clip_norm != spec.clip ||
      config.optimizer.name != spec.optimizer || config.schedule.lr != spec.lr ||
      config.schedule.warmup_steps != spec.warmup) {
    state.SkipWithError("gradlab's default RunConfig no longer matches bench_shared.h CopySpec");
    return;
  }
  gradlab::train::Trainer trainer(config);
  // Identical initial weights on both sides: gradlab's initialisation scheme, drawn from the
  // shared generator by parameter name.
  auto named = trainer.model().named_parameters();
  const auto specs = gb::model_params(spec);
  if (named.size() != specs.size()) {
    state.SkipWithError("DecoderLM's parameter list no longer matches bench_shared.h");
    return;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (named[i].first != specs[i].name || named[i].second.shape() != specs[i].shape) {
      state.SkipWithError(
          ("parameter " + named[i].first + " does not match " + specs[i].name).c_str());
      return;
    }
    set_values(named[i].second, gb::initial_values(specs[i]));
  }

  double check = 0;
  for (int64_t i = 0; i < gb::train_step_warmup(); ++i) {
    const double loss = trainer.train_step().loss;
    if (i == 0) check = loss;
  }
  for (auto _ : state) {
    const gradlab::train::StepResult r = trainer.train_step();
    benchmark::DoNotOptimize(r.loss);
  }
  state.counters["check"] = check;
}

// Each product through the GEMM kernel with the threading rule of gradlab's matmul: one large
// product splits its rows across threads, a batch of small ones takes a thread per product.
void BM_StepProducts(benchmark::State& state) {
  const std::vector<gb::Product> products = gb::step_products(gb::CopySpec{});
  struct Buffers {
    std::vector<float> a, b, c;
  };
  std::vector<Buffers> buffers;
  for (size_t i = 0; i < products.size(); ++i) {
    const gb::Product& p = products[i];
    const std::string tag = std::string(gb::step_products_name()) + "/" + std::to_string(i);
    buffers.push_back({gb::normal_values(tag + "/a", p.batch * p.m * p.k, 1.0),
                       gb::normal_values(tag + "/b", p.batch * p.k * p.n, 1.0),
                       std::vector<float>(static_cast<size_t>(p.batch * p.m * p.n))});
  }
  auto run_all = [&] {
    for (size_t i = 0; i < products.size(); ++i) {
      const gb::Product& p = products[i];
      Buffers& x = buffers[i];
      const bool parallel = p.batch * p.m * p.n * p.k > gradlab::kernels::kParallelGemmFlops;
      auto product = [&](int64_t j, bool split_rows) {
        gradlab::kernels::gemm<float>(
            p.m, p.n, p.k, {x.a.data() + j * p.m * p.k, p.transposed_a ? p.m : p.k, p.transposed_a},
            {x.b.data() + j * p.k * p.n, p.transposed_b ? p.k : p.n, p.transposed_b},
            x.c.data() + j * p.m * p.n, p.n, false, nullptr, split_rows);
      };
      if (p.batch == 1) {
        product(0, parallel);  // outside any parallel region, as matmul does
        continue;
      }
#pragma omp parallel for if (parallel) schedule(static)
      for (int64_t j = 0; j < p.batch; ++j) product(j, false);
    }
  };
  run_all();  // warm-up
  double check = 0;
  for (const Buffers& x : buffers) check += x.c[0];
  for (auto _ : state) {
    run_all();
    benchmark::ClobberMemory();
  }
  state.counters["check"] = check;
  state.counters["flops"] = gb::step_products_flops(gb::CopySpec{});  // per iteration
}

void BM_MatmulSquare(benchmark::State& state, int64_t n) {
  const std::string tag = gb::matmul_name(n);
  const Tensor a = Tensor::from_vector(gb::normal_values(tag + "/a", n * n, 1.0), {n, n});
  const Tensor b = Tensor::from_vector(gb::normal_values(tag + "/b", n * n, 1.0), {n, n});
  double check = 0;
  {
    const Tensor c = gradlab::matmul(a, b);  // warm-up
    check = c.data<float>()[0];
  }
  for (auto _ : state) {
    Tensor c = gradlab::matmul(a, b);
    const float* out = c.data<float>();
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] = benchmark::Counter(
      gb::matmul_flops(n) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["check"] = check;
}

// Registered at start-up, next to the micro-benchmarks of bench_autograd.cpp.
[[maybe_unused]] const bool compare_registered = [] {
  auto register_mha = [](const gb::MhaShape& s) {
    benchmark::RegisterBenchmark(gb::mha_name(s).c_str(), BM_Mha, s)
        ->Iterations(gb::mha_iterations(s))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  };
  for (const gb::MhaShape& s : gb::kMhaShapes) register_mha(s);
  for (const gb::MhaShape& s : gb::kLongMhaShapes) register_mha(s);
  benchmark::RegisterBenchmark(gb::train_step_name(), BM_TrainStep)
      ->Iterations(gb::train_step_iterations())
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  benchmark::RegisterBenchmark(gb::step_products_name(), BM_StepProducts)
      ->Iterations(gb::train_step_iterations())
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime();
  for (const int64_t n : gb::kMatmulSizes) {
    benchmark::RegisterBenchmark(gb::matmul_name(n).c_str(), BM_MatmulSquare, n)
        ->Iterations(gb::matmul_iterations(n))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
