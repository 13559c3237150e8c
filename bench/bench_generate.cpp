// Text generation, per token, as the generated text grows: with the KV cache each new token is
// one query against the cached keys and values, so the time per token stays flat; without it
// every token re-reads its whole window, so the time per token grows with the window until the
// window is full (context tokens). The model is configs/char.ini's (4 layers, 4 heads,
// d-model 128, d-ff 512, tied embeddings) with a context of 256 and 96 symbols; its weights are
// random (generation costs the same whatever they are).
//
//   ./scripts/bench.sh --benchmark_filter=Generate --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include "nn/generate.h"
#include "nn/models.h"

namespace {

constexpr int64_t kContext = 256;

void BM_Generate(benchmark::State& state) {
  gradlab::nn::ModelConfig config;
  config.vocab_size = 96;
  config.max_len = kContext;
  config.d_model = 128;
  config.attention.num_heads = 4;
  config.num_layers = 4;
  config.feed_forward.d_ff = 512;
  config.bias = false;
  config.embedding.tie_embeddings = true;
  config.init = "gpt2";
  gradlab::nn::DecoderLM model(config);
  gradlab::nn::SamplingOptions options;
  options.tokens = state.range(0);
  options.use_cache = state.range(1) != 0;
  for (auto _ : state) {
    const std::vector<int64_t> text = gradlab::nn::generate(model, kContext, {1}, options);
    benchmark::DoNotOptimize(text.data());
  }
  state.SetLabel(options.use_cache ? "KV cache" : "no cache");
  // Seconds per generated token, averaged over the whole text.
  state.counters["per_token"] =
      benchmark::Counter(static_cast<double>(state.iterations() * options.tokens),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_Generate)
    ->ArgNames({"tokens", "cache"})
    ->ArgsProduct({{32, 128, 256, 1024}, {1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
