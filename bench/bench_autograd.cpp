// Micro-benchmarks of the autograd engine: GEMM throughput, softmax, and one small
// forward+backward graph. Run through scripts/bench.sh; pass Google Benchmark flags such as
// --benchmark_filter=Matmul or --benchmark_format=json (main() is in bench_main.cpp).
//
// Kernels may use OpenMP threads, so every benchmark measures wall-clock time (UseRealTime):
// CPU time would add up the threads and understate throughput.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>

#include "autograd/ops.h"

namespace {

using gradlab::Tensor;

// Square float32 matmul, [N, N] @ [N, N], without a graph. Reports FLOPS (2*N^3 per product);
// the console prints it with an SI prefix, e.g. "FLOPS=85G/s" is 85 GFLOP/s.
void BM_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  gradlab::Generator gen(0);
  const Tensor a = Tensor::randn({n, n}, gen);
  const Tensor b = Tensor::randn({n, n}, gen);
  for (auto _ : state) {
    Tensor c = gradlab::matmul(a, b);
    const float* out = c.data<float>();
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["FLOPS"] = benchmark::Counter(flops * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Matmul)
    ->Arg(128)
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Softmax along the last axis of attention-shaped scores [batch, heads, T, T], no graph.
void BM_Softmax(benchmark::State& state) {
  gradlab::Generator gen(0);
  const Tensor x = Tensor::randn({64, 4, 64, 64}, gen);
  for (auto _ : state) {
    Tensor y = gradlab::softmax(x, -1);
    const float* out = y.data<float>();
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  // One read and one write of every element.
  state.SetBytesProcessed(state.iterations() * x.numel() * 2 * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_Softmax)->Unit(benchmark::kMicrosecond)->UseRealTime();

// A small graph, forward and backward: sum(gelu(x [32, 64, 128] @ w [128, 128] + bias [128])),
// with w and bias requiring grad. Includes graph construction and the gradient zeroing a training
// step would do.
void BM_GraphForwardBackward(benchmark::State& state) {
  gradlab::Generator gen(0);
  const Tensor x = Tensor::randn({32, 64, 128}, gen);
  Tensor w = Tensor::randn({128, 128}, gen, gradlab::DType::Float32, 0.0, 1.0 / std::sqrt(128.0));
  w.set_requires_grad();
  Tensor bias = Tensor::zeros({128});
  bias.set_requires_grad();
  for (auto _ : state) {
    w.zero_grad();
    bias.zero_grad();
    Tensor loss = gradlab::sum(gradlab::gelu(gradlab::matmul(x, w) + bias));
    loss.backward();
    const float* grad_w = w.grad().data<float>();
    const float* grad_bias = bias.grad().data<float>();
    benchmark::DoNotOptimize(grad_w);
    benchmark::DoNotOptimize(grad_bias);
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_GraphForwardBackward)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
