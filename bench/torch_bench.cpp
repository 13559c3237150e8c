// The libtorch side of the comparison (bench/bench_compare.cpp is the gradlab side): the same
// workload names, shapes, float32 values (bench_shared.h) and thread count, through libtorch's
// C++ API with plain tensor ops.
//
//   gradlab_torch_bench [--threads=N] [Google Benchmark flags]   the timed workloads
//   gradlab_torch_bench [--threads=N] --copy_run                 train the copy task to 99%
//                                                                exact match, print one JSON line
//   gradlab_torch_bench --probe                                  print the BLAS in use (JSON)
//
// Threads: torch::set_num_threads(N), one inter-op thread, and openblas_set_num_threads(N) when
// the BLAS that libtorch loaded is OpenBLAS.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <torch/torch.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "bench_shared.h"

namespace {

namespace gb = gradlab_bench;
namespace F = torch::nn::functional;

torch::Tensor tensor(const std::vector<float>& values, const std::vector<int64_t>& shape) {
  return torch::from_blob(const_cast<float*>(values.data()), shape, torch::kFloat32).clone();
}

torch::Tensor tokens(const std::vector<int64_t>& values, int64_t rows, int64_t length) {
  return torch::from_blob(const_cast<int64_t*>(values.data()), {rows, length}, torch::kInt64)
      .clone();
}

// --- BLAS identification ---------------------------------------------------------------------

// The shared object that provides the BLAS (from /proc/self/maps), e.g. .../libblas.so.3.
std::string blas_library() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string file = path.substr(path.rfind('/') + 1);
    if (file.find("blas") != std::string::npos) return path;
  }
  return "unknown";
}

// OpenBLAS's kernel family ("SkylakeX", "Haswell", "Prescott" ...), or "" for another BLAS.
std::string openblas_core() {
  using CoreName = char* (*)();
  if (auto f = reinterpret_cast<CoreName>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) {
    return f();
  }
  return "";
}

void set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  if (auto f = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    f(threads);
  }
}

// --- Workload 1: multi-head self-attention, plain ops ------------------------------------

void BM_Mha(benchmark::State& state, gb::MhaShape s) {
  const gb::MhaData d = gb::mha_data(s);
  const int64_t B = s.B, T = s.T, C = s.C, H = s.H, D = C / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  torch::Tensor x = tensor(d.x, {B, T, C}).requires_grad_();
  torch::Tensor wq = tensor(d.wq, {C, C}).requires_grad_(), bq = tensor(d.bq, {C}).requires_grad_();
  torch::Tensor wk = tensor(d.wk, {C, C}).requires_grad_(), bk = tensor(d.bk, {C}).requires_grad_();
  torch::Tensor wv = tensor(d.wv, {C, C}).requires_grad_(), bv = tensor(d.bv, {C}).requires_grad_();
  torch::Tensor wo = tensor(d.wo, {C, C}).requires_grad_(), bo = tensor(d.bo, {C}).requires_grad_();
  const torch::Tensor upstream = tensor(d.upstream, {B, T, C});
  std::vector<torch::Tensor> leaves{x, wq, bq, wk, bk, wv, bv, wo, bo};
  // Keys after the query, hidden under the causal rule (as nanoGPT writes it without a fused
  // kernel).
  const torch::Tensor future = torch::ones({T, T}, torch::kBool).triu(1);

  auto iteration = [&] {
    for (torch::Tensor& t : leaves) t.mutable_grad().reset();
    const auto q = (x.matmul(wq.t()) + bq).view({B, T, H, D}).transpose(1, 2);  // [B, H, T, D]
    const auto k = (x.matmul(wk.t()) + bk).view({B, T, H, D}).transpose(1, 2);
    const auto v = (x.matmul(wv.t()) + bv).view({B, T, H, D}).transpose(1, 2);
    auto scores = q.matmul(k.transpose(-2, -1)) * scale;  // [B, H, T, T]
    if (s.causal) scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
    const auto weights = scores.softmax(-1);
    const auto concat = weights.matmul(v).transpose(1, 2).reshape({B, T, C});
    const auto out = F::linear(concat, wo, bo);
    torch::Tensor loss = (out * upstream).sum();
    loss.backward();
    return loss;
  };
  const double check = iteration().item<double>();  // warm-up
  for (auto _ : state) {
    torch::Tensor loss = iteration();
    float* grad = x.grad().data_ptr<float>();
    benchmark::DoNotOptimize(grad);
    benchmark::ClobberMemory();
  }
  state.counters["check"] = check;
}

// --- Workloads 2 and 3: the default copy-task model -------------------------------------

struct Block {
  torch::Tensor ln1_w, ln1_b, wq, bq, wk, bk, wv, bv, wo, bo, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w,
      fc2_b;
};

// gradlab's DecoderLM: token + learned position embedding, pre-LN blocks with causal
// self-attention and a GELU (exact) feed-forward, final LayerNorm, linear head.
class CopyModel {
 public:
  explicit CopyModel(const gb::CopySpec& c) : c_(c) {
    std::vector<torch::Tensor> decay, no_decay;
    for (const gb::ParamSpec& p : gb::model_params(c)) {
      torch::Tensor t = tensor(gb::initial_values(p), p.shape).requires_grad_();
      params_.push_back(t);
      (p.shape.size() >= 2 ? decay : no_decay).push_back(t);  // gradlab's decays()
    }
    size_t i = 0;
    auto next = [&] { return params_[i++]; };
    tok_ = next();
    pos_ = next();
    for (int64_t l = 0; l < c.layers; ++l) {
      Block b;
      for (torch::Tensor* t : {&b.ln1_w, &b.ln1_b, &b.wq, &b.bq, &b.wk, &b.bk, &b.wv, &b.bv, &b.wo,
                               &b.bo, &b.ln2_w, &b.ln2_b, &b.fc1_w, &b.fc1_b, &b.fc2_w, &b.fc2_b}) {
        *t = next();
      }
      blocks_.push_back(b);
    }
    lnf_w_ = next();
    lnf_b_ = next();
    head_w_ = next();
    head_b_ = next();
    causal_ = torch::ones({c.seq, c.seq}, torch::kBool).triu(1);  // true above the diagonal

    auto options = [&](double wd) {
      return std::make_unique<torch::optim::AdamWOptions>(
          torch::optim::AdamWOptions(c.lr).betas({c.beta1, c.beta2}).eps(c.eps).weight_decay(wd));
    };
    std::vector<torch::optim::OptimizerParamGroup> groups;
    groups.emplace_back(decay, options(c.weight_decay));
    groups.emplace_back(no_decay, options(0.0));
    optimizer_ = std::make_unique<torch::optim::AdamW>(std::move(groups));
  }

  torch::Tensor forward(const torch::Tensor& inputs) const {
    const int64_t B = inputs.size(0), T = inputs.size(1);
    torch::Tensor x = F::embedding(inputs, tok_) + pos_.narrow(0, 0, T);
    const auto mask = causal_.narrow(0, 0, T).narrow(1, 0, T);
    for (const Block& b : blocks_) {
      x = x + attention(layer_norm(x, b.ln1_w, b.ln1_b), b, mask, B, T);
      const auto h = layer_norm(x, b.ln2_w, b.ln2_b);
      x = x + F::linear(torch::gelu(F::linear(h, b.fc1_w, b.fc1_b)), b.fc2_w, b.fc2_b);
    }
    return F::linear(layer_norm(x, lnf_w_, lnf_b_), head_w_, head_b_);  // [B, T, V]
  }

  // One optimizer step (1-based `step`) on training batch `step`; returns the loss.
  double train_step(int64_t step) {
    const gb::CopyBatch batch = gb::training_batch(c_, step);
    const torch::Tensor inputs = tokens(batch.inputs, batch.rows, batch.length);
    const torch::Tensor targets = tokens(batch.targets, batch.rows, batch.length);
    optimizer_->zero_grad();
    const torch::Tensor logits = forward(inputs);
    torch::Tensor loss = F::cross_entropy(logits.view({-1, c_.vocab}), targets.view({-1}),
                                          F::CrossEntropyFuncOptions().ignore_index(gb::kIgnore));
    loss.backward();
    torch::nn::utils::clip_grad_norm_(params_, c_.clip);
    const double lr = gb::learning_rate(c_, step);
    for (auto& group : optimizer_->param_groups()) {
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    }
    optimizer_->step();
    return loss.item<double>();
  }

  // Teacher-forced exact match on the held-out set.
  double exact_match(const torch::Tensor& inputs, const torch::Tensor& targets) const {
    torch::NoGradGuard no_grad;
    const torch::Tensor predicted = forward(inputs).argmax(-1);
    const torch::Tensor right = predicted.eq(targets).logical_or(targets.eq(gb::kIgnore));
    return right.all(1).to(torch::kFloat64).mean().item<double>();
  }

 private:
  torch::Tensor layer_norm(const torch::Tensor& x, const torch::Tensor& w,
                           const torch::Tensor& b) const {
    return torch::layer_norm(x, {c_.d_model}, w, b, c_.ln_eps);
  }

  torch::Tensor attention(const torch::Tensor& h, const Block& b, const torch::Tensor& mask,
                          int64_t B, int64_t T) const {
    const int64_t C = c_.d_model, H = c_.heads, D = C / H;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    const auto q = F::linear(h, b.wq, b.bq).view({B, T, H, D}).transpose(1, 2);
    const auto k = F::linear(h, b.wk, b.bk).view({B, T, H, D}).transpose(1, 2);
    const auto v = F::linear(h, b.wv, b.bv).view({B, T, H, D}).transpose(1, 2);
    const auto scores = (q.matmul(k.transpose(-2, -1)) * scale)
                            .masked_fill(mask, -std::numeric_limits<float>::infinity());
    const auto concat = scores.softmax(-1).matmul(v).transpose(1, 2).reshape({B, T, C});
    return F::linear(concat, b.wo, b.bo);
  }

  gb::CopySpec c_;
  std::vector<torch::Tensor> params_;
  torch::Tensor tok_, pos_, lnf_w_, lnf_b_, head_w_, head_b_, causal_;
  std::vector<Block> blocks_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
};

void BM_TrainStep(benchmark::State& state) {
  const gb::CopySpec spec;
  CopyModel model(spec);
  int64_t step = 0;
  double check = 0;
  for (int64_t i = 0; i < gb::train_step_warmup(); ++i) {
    const double loss = model.train_step(++step);
    if (i == 0) check = loss;
  }
  for (auto _ : state) {
    const double loss = model.train_step(++step);
    benchmark::DoNotOptimize(loss);
  }
  state.counters["check"] = check;
}

// The default copy run: eval every 50 steps on 512 held-out sequences, stop at 99% exact match.
int copy_run() {
  const gb::CopySpec spec;
  CopyModel model(spec);
  const gb::CopyBatch heldout = gb::heldout_batch(spec);
  const torch::Tensor inputs = tokens(heldout.inputs, heldout.rows, heldout.length);
  const torch::Tensor targets = tokens(heldout.targets, heldout.rows, heldout.length);
  const auto start = std::chrono::steady_clock::now();
  int64_t step = 0;
  double exact = 0, loss = 0;
  bool reached = false;
  while (step < spec.max_steps && !reached) {
    loss = model.train_step(++step);
    if (!std::isfinite(loss)) break;
    if (step % spec.eval_every == 0) {
      exact = model.exact_match(inputs, targets);
      reached = exact >= spec.target;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "{\"steps\": %lld, \"seconds\": %.4f, \"exact_match\": %.4f, \"loss\": %.5f, "
      "\"reached\": %s}\n",
      static_cast<long long>(step), seconds, exact, loss, reached ? "true" : "false");
  return reached ? 0 : 3;
}

// --- Workload 3b: the products of one training step, through libtorch's mm and bmm ----------

void BM_StepProducts(benchmark::State& state) {
  torch::NoGradGuard no_grad;
  const std::vector<gb::Product> products = gb::step_products(gb::CopySpec{});
  std::vector<std::array<torch::Tensor, 3>> operands;  // op(a), op(b) (views), c
  for (size_t i = 0; i < products.size(); ++i) {
    const gb::Product& p = products[i];
    const std::string tag = std::string(gb::step_products_name()) + "/" + std::to_string(i);
    const std::vector<int64_t> a_shape = p.transposed_a ? std::vector<int64_t>{p.batch, p.k, p.m}
                                                        : std::vector<int64_t>{p.batch, p.m, p.k};
    const std::vector<int64_t> b_shape = p.transposed_b ? std::vector<int64_t>{p.batch, p.n, p.k}
                                                        : std::vector<int64_t>{p.batch, p.k, p.n};
    torch::Tensor a = tensor(gb::normal_values(tag + "/a", p.batch * p.m * p.k, 1.0), a_shape);
    torch::Tensor b = tensor(gb::normal_values(tag + "/b", p.batch * p.k * p.n, 1.0), b_shape);
    if (p.transposed_a) a = a.transpose(1, 2);
    if (p.transposed_b) b = b.transpose(1, 2);
    if (p.batch == 1) {
      a = a.squeeze(0);
      b = b.squeeze(0);
    }
    operands.push_back({a, b,
                        torch::empty(p.batch == 1 ? std::vector<int64_t>{p.m, p.n}
                                                  : std::vector<int64_t>{p.batch, p.m, p.n})});
  }
  auto run_all = [&] {
    for (auto& [a, b, c] : operands) {
      if (a.dim() == 2) {
        torch::mm_out(c, a, b);
      } else {
        torch::bmm_out(c, a, b);
      }
    }
  };
  run_all();  // warm-up
  double check = 0;
  for (const auto& o : operands) check += o[2].flatten()[0].item<double>();
  for (auto _ : state) {
    run_all();
    benchmark::ClobberMemory();
  }
  state.counters["check"] = check;
}

// --- Workload 4: square matmul ---------------------------------------------------------------

void BM_MatmulSquare(benchmark::State& state, int64_t n) {
  const std::string tag = gb::matmul_name(n);
  const torch::Tensor a = tensor(gb::normal_values(tag + "/a", n * n, 1.0), {n, n});
  const torch::Tensor b = tensor(gb::normal_values(tag + "/b", n * n, 1.0), {n, n});
  double check = 0;
  {
    torch::NoGradGuard no_grad;
    check = torch::matmul(a, b)[0][0].item<double>();  // warm-up
  }
  for (auto _ : state) {
    torch::Tensor c = torch::matmul(a, b);
    float* out = c.data_ptr<float>();
    benchmark::DoNotOptimize(out);
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] = benchmark::Counter(
      gb::matmul_flops(n) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["check"] = check;
}

void register_benchmarks() {
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
}

bool take_flag(int& argc, char** argv, const char* flag) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], flag) == 0) {
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      return true;
    }
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 1;
  bool run_copy = false, probe = false;
  try {
    threads = gb::take_threads_flag(argc, argv);
    run_copy = take_flag(argc, argv, "--copy_run");
    probe = take_flag(argc, argv, "--probe");
  } catch (const std::exception& e) {
    std::cerr << "gradlab_torch_bench: " << e.what() << '\n';
    return 2;
  }
  at::set_num_interop_threads(1);
  torch::set_num_threads(threads);
  set_blas_threads(threads);

  const std::string blas = blas_library(), core = openblas_core();
  if (probe) {
    std::printf("{\"blas\": \"%s\", \"openblas_core\": \"%s\", \"torch\": \"%d.%d.%d\"}\n",
                blas.c_str(), core.c_str(), TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR,
                TORCH_VERSION_PATCH);
    return 0;
  }
  try {
    if (run_copy) return copy_run();
    register_benchmarks();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::AddCustomContext("engine", "libtorch");
    benchmark::AddCustomContext("threads", std::to_string(threads));
    benchmark::AddCustomContext("blas", blas);
    benchmark::AddCustomContext("openblas_core", core);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
  } catch (const std::exception& e) {
    std::cerr << "gradlab_torch_bench: " << e.what() << '\n';
    return 1;
  }
  return 0;
}
