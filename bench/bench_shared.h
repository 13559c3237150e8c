// What the gradlab and libtorch comparison binaries share: the workloads (names, shapes,
// iteration counts), the copy-task model's hyperparameters and parameter list, a splitmix64
// generator that fills every weight and input, and the copy-task batches of the libtorch side.
//
// Header only, standard library only: both binaries include it, neither depends on the other,
// and the same (workload, tensor name) always yields the same float32 values in both.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <numbers>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gradlab_bench {

// ---------------------------------------------------------------------------------------------
// Deterministic values

inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a: a stable 64-bit seed from a tensor's name.
inline uint64_t seed_of(std::string_view text) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64(state_); }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {                                                           // Box-Muller
    const double u1 = 1.0 - uniform();                                        // (0, 1]
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t state_;
};

inline int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

inline std::vector<float> uniform_values(std::string_view name, int64_t n, double lo, double hi) {
  SplitMix rng(seed_of(name));
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(lo + (hi - lo) * rng.uniform());
  return v;
}

inline std::vector<float> normal_values(std::string_view name, int64_t n, double stddev) {
  SplitMix rng(seed_of(name));
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(stddev * rng.normal());
  return v;
}

// ---------------------------------------------------------------------------------------------
// Workload 1: multi-head self-attention forward + backward

struct MhaShape {
  int64_t B, T, C, H;
  bool causal = false;  // query i sees keys j <= i
};
inline constexpr std::array<MhaShape, 4> kMhaShapes{
    {{1, 3, 4, 2}, {32, 64, 128, 4}, {16, 128, 256, 8}, {8, 256, 512, 8}}};
// Long sequences at a fixed width, B x T = 2048 tokens up to T = 2048: the range of the tiled
// attention kernel, where memory grows with T (linearly in gradlab, quadratically with the
// weights written out).
inline constexpr std::array<MhaShape, 10> kLongMhaShapes{{{8, 256, 256, 8},
                                                          {8, 256, 256, 8, true},
                                                          {4, 512, 256, 8},
                                                          {4, 512, 256, 8, true},
                                                          {2, 1024, 256, 8},
                                                          {2, 1024, 256, 8, true},
                                                          {1, 2048, 256, 8},
                                                          {1, 2048, 256, 8, true},
                                                          {1, 4096, 256, 8},
                                                          {1, 4096, 256, 8, true}}};

inline std::string mha_name(const MhaShape& s) {
  return "mha_fwd_bwd/B" + std::to_string(s.B) + "_T" + std::to_string(s.T) + "_C" +
         std::to_string(s.C) + "_H" + std::to_string(s.H) + (s.causal ? "_causal" : "");
}

// Timed iterations per process run (one untimed warm-up iteration comes first): about 0.1-0.5 s
// of work at libtorch's speed.
inline int64_t mha_iterations(const MhaShape& s) {
  const int64_t work = s.B * s.T * s.C * (s.C + s.T);  // proportional to the flops
  if (work < 1'000'000) return 400;
  if (work < 100'000'000) return 30;
  if (work < 500'000'000) return 10;
  if (work < 2'000'000'000) return 3;
  return 1;  // T = 4096: libtorch takes over 10 s an iteration
}

// Inputs, parameters (nn.Linear layout: W [out, in], b [out]) and the fixed upstream gradient.
struct MhaData {
  std::vector<float> x, wq, bq, wk, bk, wv, bv, wo, bo, upstream;
};

inline MhaData mha_data(const MhaShape& s) {
  const std::string tag = mha_name(s) + "/";
  const int64_t act = s.B * s.T * s.C, mat = s.C * s.C;
  const double a = std::sqrt(6.0 / static_cast<double>(2 * s.C));  // Xavier uniform
  const double b = 1.0 / std::sqrt(static_cast<double>(s.C));
  MhaData d;
  d.x = normal_values(tag + "x", act, 1.0);
  d.wq = uniform_values(tag + "q_proj.weight", mat, -a, a);
  d.bq = uniform_values(tag + "q_proj.bias", s.C, -b, b);
  d.wk = uniform_values(tag + "k_proj.weight", mat, -a, a);
  d.bk = uniform_values(tag + "k_proj.bias", s.C, -b, b);
  d.wv = uniform_values(tag + "v_proj.weight", mat, -a, a);
  d.bv = uniform_values(tag + "v_proj.bias", s.C, -b, b);
  d.wo = uniform_values(tag + "out_proj.weight", mat, -a, a);
  d.bo = uniform_values(tag + "out_proj.bias", s.C, -b, b);
  d.upstream = normal_values(tag + "upstream", act, 1.0);
  return d;
}

// ---------------------------------------------------------------------------------------------
// Workload 4: square float32 matmul

inline constexpr std::array<int64_t, 4> kMatmulSizes{256, 512, 1024, 2048};
inline std::string matmul_name(int64_t n) {
  return "matmul/N" + std::to_string(n);
}
inline int64_t matmul_iterations(int64_t n) {
  if (n <= 256) return 200;
  if (n <= 512) return 40;
  if (n <= 1024) return 8;
  return 2;
}
inline double matmul_flops(int64_t n) {
  return 2.0 * static_cast<double>(n * n) * static_cast<double>(n);
}

// ---------------------------------------------------------------------------------------------
// Workloads 2 and 3: the default copy-task model and run (gradlab's RunConfig defaults)

struct CopySpec {
  // The kinds the libtorch side writes out: the decoder-only model on the copy task, AdamW.
  const char* model = "decoder";
  const char* task = "copy";
  const char* optimizer = "adamw";
  int64_t num_symbols = 10;  // symbols 1..10, separator 0, padding 11
  int64_t length = 10;
  int64_t vocab = 12;
  int64_t seq = 20;      // model input length (sample of 21 tokens without its last)
  int64_t max_len = 21;  // rows of the position table
  int64_t d_model = 64;
  int64_t heads = 4;
  int64_t layers = 2;
  int64_t d_ff = 256;
  int64_t batch = 64;
  double lr = 3e-3;
  double beta1 = 0.9, beta2 = 0.98, eps = 1e-8, weight_decay = 0.01;
  double clip = 1.0;
  int64_t warmup = 100;
  int64_t eval_every = 50;
  int64_t eval_size = 512;
  double target = 0.99;
  int64_t max_steps = 3000;
  double ln_eps = 1e-5;
};
inline constexpr int64_t kIgnore = -100;

inline const char* train_step_name() {
  return "train_step/copy_default";
}
inline int64_t train_step_iterations() {
  return 20;
}
inline int64_t train_step_warmup() {
  return 3;
}

// The matrix products of one training step of the default copy model, forward and backward:
// each engine's time for these alone is a floor under its training step. c [m, n] = op(a) op(b)
// with a stored [m, k] (transposed: [k, m]) and b stored [k, n] (transposed: [n, k]), `batch`
// independent products of the shape. The list is the textbook one (three Q/K/V projections,
// per-head attention products) whatever either engine fuses: the same flops on both sides.
struct Product {
  int64_t batch, m, n, k;
  bool transposed_a, transposed_b;
};

inline std::vector<Product> step_products(const CopySpec& c) {
  const int64_t rows = c.batch * c.seq, C = c.d_model, F = c.d_ff, T = c.seq;
  const int64_t heads = c.batch * c.heads, D = C / c.heads;
  std::vector<Product> p;
  // A linear layer x [rows, in] -> [rows, out]: x W^T; backward dX = dY W, dW = dY^T x.
  auto linear = [&](int64_t in, int64_t out) {
    p.push_back({1, rows, out, in, false, true});
    p.push_back({1, rows, in, out, false, false});
    p.push_back({1, out, in, rows, true, false});
  };
  for (int64_t layer = 0; layer < c.layers; ++layer) {
    for (int i = 0; i < 4; ++i) linear(C, C);  // Q, K, V, output projections
    linear(C, F);
    linear(F, C);
    p.push_back({heads, T, T, D, false, true});   // scores Q K^T
    p.push_back({heads, T, D, T, false, false});  // weights V
    p.push_back({heads, T, D, T, true, false});   // dV = W^T dO
    p.push_back({heads, T, T, D, false, true});   // dW = dO V^T
    p.push_back({heads, T, D, T, false, false});  // dQ = dS K
    p.push_back({heads, T, D, T, true, false});   // dK = dS^T Q
  }
  linear(C, c.vocab);  // the output head
  return p;
}

inline double step_products_flops(const CopySpec& c) {
  double flops = 0;
  for (const Product& q : step_products(c))
    flops += 2.0 * static_cast<double>(q.batch * q.m * q.n) * static_cast<double>(q.k);
  return flops;
}

inline const char* step_products_name() {
  return "step_products/copy_default";
}

// gradlab's constant schedule: linear warm-up lr * s / warmup for s < warmup, then lr.
inline double learning_rate(const CopySpec& c, int64_t step) {
  if (c.warmup > 0 && step < c.warmup) {
    return c.lr * static_cast<double>(step) / static_cast<double>(c.warmup);
  }
  return c.lr;
}

struct ParamSpec {
  std::string name;  // gradlab's dotted name
  std::vector<int64_t> shape;
};

// Every parameter of gradlab's DecoderLM, in its named_parameters() order.
inline std::vector<ParamSpec> model_params(const CopySpec& c) {
  std::vector<ParamSpec> p;
  const int64_t C = c.d_model;
  p.push_back({"embed.token_embedding.weight", {c.vocab, C}});
  p.push_back({"embed.position_embedding.weight", {c.max_len, C}});
  for (int64_t i = 0; i < c.layers; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    p.push_back({b + "ln1.weight", {C}});
    p.push_back({b + "ln1.bias", {C}});
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      p.push_back({b + "attn." + proj + ".weight", {C, C}});
      p.push_back({b + "attn." + proj + ".bias", {C}});
    }
    p.push_back({b + "ln2.weight", {C}});
    p.push_back({b + "ln2.bias", {C}});
    p.push_back({b + "ffn.fc1.weight", {c.d_ff, C}});
    p.push_back({b + "ffn.fc1.bias", {c.d_ff}});
    p.push_back({b + "ffn.fc2.weight", {C, c.d_ff}});
    p.push_back({b + "ffn.fc2.bias", {C}});
  }
  p.push_back({"ln_f.weight", {C}});
  p.push_back({"ln_f.bias", {C}});
  p.push_back({"head.weight", {c.vocab, C}});
  p.push_back({"head.bias", {c.vocab}});
  return p;
}

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// gradlab's initialisation scheme, drawn from SplitMix seeded by the name: embeddings
// N(0, 0.02), LayerNorm weight 1 and bias 0, Linear weight Xavier uniform and bias 0.
inline std::vector<float> initial_values(const ParamSpec& p) {
  const int64_t n = numel(p.shape);
  const std::string& name = p.name;
  if (name.find("embedding") != std::string::npos) return normal_values(name, n, 0.02);
  if (ends_with(name, ".bias")) return std::vector<float>(static_cast<size_t>(n), 0.0f);
  if (p.shape.size() == 1) return std::vector<float>(static_cast<size_t>(n), 1.0f);  // LayerNorm
  if (p.shape.size() != 2) throw std::invalid_argument("initial_values: unexpected " + name);
  const double a = std::sqrt(6.0 / static_cast<double>(p.shape[0] + p.shape[1]));
  return uniform_values(name, n, -a, a);
}

// Copy-task batches of the libtorch side: x1..x10 SEP x1..x10 with x uniform in 1..10; inputs
// are the first 20 tokens, targets the next token at each position, kIgnore except where the
// target is one of the 10 copied symbols. Training batch `step` and the held-out set come from
// separate splitmix streams. (gradlab's Trainer draws its own batches from the same
// distribution with its own generator.)
struct CopyBatch {
  int64_t rows = 0, length = 0;
  std::vector<int64_t> inputs, targets;  // [rows, length] row-major
};

inline CopyBatch copy_batch(const CopySpec& c, uint64_t stream, int64_t rows) {
  SplitMix rng(seed_of("copy-task") ^ (stream * 0xD1B54A32D192ED03ull));
  CopyBatch b;
  b.rows = rows;
  b.length = c.seq;
  const int64_t sample_len = 2 * c.length + 1;
  std::vector<int64_t> sample(static_cast<size_t>(sample_len));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < c.length; ++i) {
      sample[static_cast<size_t>(i)] = rng.below(c.num_symbols) + 1;
      sample[static_cast<size_t>(c.length + 1 + i)] = sample[static_cast<size_t>(i)];
    }
    sample[static_cast<size_t>(c.length)] = 0;  // separator
    for (int64_t t = 0; t < c.seq; ++t) {
      b.inputs.push_back(sample[static_cast<size_t>(t)]);
      b.targets.push_back(t >= c.length ? sample[static_cast<size_t>(t + 1)] : kIgnore);
    }
  }
  return b;
}
inline CopyBatch training_batch(const CopySpec& c, int64_t step) {
  return copy_batch(c, static_cast<uint64_t>(step), c.batch);
}
inline CopyBatch heldout_batch(const CopySpec& c) {
  return copy_batch(c, ~uint64_t{0}, c.eval_size);
}

// ---------------------------------------------------------------------------------------------
// Command line shared by both binaries: --threads=N (default 1) is taken out of argv before
// Google Benchmark sees the rest.

inline int take_threads_flag(int& argc, char** argv) {
  int threads = 1;
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--threads=")) {
      threads = std::stoi(std::string(arg.substr(10)));
      if (threads < 1) throw std::invalid_argument("--threads must be >= 1");
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return threads;
}

}  // namespace gradlab_bench
