// gradlab_gemm_bench: gradlab's matrix-product kernel next to the libraries that could replace
// it (OpenBLAS, BLIS, libxsmm), on square matrices and on the products of a training step, with
// hot caches, at each thread count; and the processor's float32 FMA peak per instruction set,
// from a loop of independent multiply-adds. The table that decides which GEMM gradlab uses
// (BENCHMARKS.md, "Matrix products: our kernel or a library").
//
//   gradlab_gemm_bench [--openblas LIB.so] [--blis LIB.so] [--threads 1,2] [--seconds S]
//                      [--only TEXT]   (only the products whose name contains TEXT)
//
// OpenBLAS and BLIS are opened at run time (their CBLAS interfaces; no link-time dependency),
// libxsmm is linked when the build found it (GRADLAB_LIBXSMM_ROOT). Each library picks its
// kernels from CPUID unless told otherwise (OPENBLAS_CORETYPE, BLIS_ARCH_TYPE, LIBXSMM_TARGET;
// gradlab: GRADLAB_ISA); scripts/bench_gemm_libraries.sh runs it once per instruction set.
#include <dlfcn.h>
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/cpu.h"
#include "autograd/kernels/gemm.h"
#include "autograd/storage.h"

#if defined(GRADLAB_HAVE_LIBXSMM)
#include <libxsmm.h>
#endif

namespace {

// c [m, n] = op(a) [m, k] @ op(b) [k, n], all row-major.
struct Shape {
  std::string name;
  int64_t m, n, k;
  bool trans_a, trans_b;
};

// The linear layers of a step of `rows` rows: forward x W^T, input gradient dY W, weight
// gradient dY^T x (the three products of each layer, as the ops issue them).
void add_linear(std::vector<Shape>& shapes, const std::string& model, const std::string& layer,
                int64_t rows, int64_t in, int64_t out) {
  shapes.push_back({model + " " + layer + " forward", rows, out, in, false, true});
  shapes.push_back({model + " " + layer + " dX", rows, in, out, false, false});
  shapes.push_back({model + " " + layer + " dW", out, in, rows, true, false});
}

std::vector<Shape> all_shapes() {
  std::vector<Shape> shapes;
  for (const int64_t n : {512, 1024, 2048}) {
    shapes.push_back({"square " + std::to_string(n), n, n, n, false, false});
  }
  // The default copy model: 64 sequences of 20 tokens, d-model 64, d-ff 256.
  add_linear(shapes, "copy", "qkv", 1280, 64, 192);
  add_linear(shapes, "copy", "fc1", 1280, 64, 256);
  add_linear(shapes, "copy", "fc2", 1280, 256, 64);
  // configs/char.ini: 12 windows of 64 characters, d-model 128, d-ff 512.
  add_linear(shapes, "char", "qkv", 768, 128, 384);
  add_linear(shapes, "char", "fc1", 768, 128, 512);
  add_linear(shapes, "char", "fc2", 768, 512, 128);
  return shapes;
}

using Gemm = std::function<void(const Shape&, const float*, const float*, float*)>;

enum CblasOrder { kRowMajor = 101 };
enum CblasTranspose { kNoTrans = 111, kTrans = 112 };
using CblasSgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                            int, float, float*, int);

// cblas_sgemm from a shared library opened on its own (RTLD_LOCAL: OpenBLAS and BLIS both define
// it), with its thread-count setter when it has one.
struct Library {
  std::string name;
  Gemm gemm;
  std::function<void(int)> set_threads;
};

std::optional<Library> open_cblas(const std::string& name, const std::string& path,
                                  const char* threads_symbol) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "gradlab_gemm_bench: cannot open %s: %s\n", path.c_str(), dlerror());
    return std::nullopt;
  }
  const auto sgemm = reinterpret_cast<CblasSgemm>(dlsym(handle, "cblas_sgemm"));
  const auto set = reinterpret_cast<void (*)(int)>(dlsym(handle, threads_symbol));
  if (sgemm == nullptr) {
    std::fprintf(stderr, "gradlab_gemm_bench: %s has no cblas_sgemm\n", path.c_str());
    return std::nullopt;
  }
  return Library{name,
                 [sgemm](const Shape& s, const float* a, const float* b, float* c) {
                   sgemm(kRowMajor, s.trans_a ? kTrans : kNoTrans, s.trans_b ? kTrans : kNoTrans,
                         int(s.m), int(s.n), int(s.k), 1.0f, a, int(s.trans_a ? s.m : s.k), b,
                         int(s.trans_b ? s.k : s.n), 0.0f, c, int(s.n));
                 },
                 [set](int threads) {
                   if (set != nullptr) set(threads);
                 }};
}

Library gradlab_library() {
  return {"gradlab (" + gradlab::isa_name(gradlab::kernel_isa()) + ")",
          [](const Shape& s, const float* a, const float* b, float* c) {
            gradlab::kernels::gemm<float>(s.m, s.n, s.k, {a, s.trans_a ? s.m : s.k, s.trans_a},
                                          {b, s.trans_b ? s.k : s.n, s.trans_b}, c, s.n, false,
                                          nullptr, omp_get_max_threads() > 1);
          },
          [](int) {}};
}

#if defined(GRADLAB_HAVE_LIBXSMM)
// libxsmm is column-major: the row-major c = op(a) op(b) is its c^T = op(b)^T op(a)^T.
Library libxsmm_library() {
  libxsmm_init();
  return {"libxsmm",
          [](const Shape& s, const float* a, const float* b, float* c) {
            const char ta = s.trans_b ? 'T' : 'N', tb = s.trans_a ? 'T' : 'N';
            const libxsmm_blasint m = s.n, n = s.m, k = s.k, lda = s.trans_b ? s.k : s.n,
                                  ldb = s.trans_a ? s.m : s.k, ldc = s.n;
            const float alpha = 1, beta = 0;
            // Its tiled product of JIT-compiled small kernels; plain libxsmm_sgemm hands shapes
            // this large to a BLAS.
            libxsmm_sgemm_omp(&ta, &tb, &m, &n, &k, &alpha, b, &lda, a, &ldb, &beta, c, &ldc);
          },
          [](int) {}};
}
#endif

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The best of three rounds of back-to-back calls (each `seconds` long) in seconds per call.
double seconds_per_call(const std::function<void()>& call, double seconds) {
  call();
  double best = 1e30;
  for (int round = 0; round < 3; ++round) {
    int64_t calls = 0;
    const double start = now();
    double elapsed = 0;
    while (elapsed < seconds) {
      call();
      ++calls;
      elapsed = now() - start;
    }
    best = std::min(best, elapsed / double(calls));
  }
  return best;
}

// Independent chains of multiply-adds, kChains accumulators of one vector each (enough to fill
// two FMA pipes of four cycles' latency), per instruction set.
constexpr int kChains = 12;
constexpr int64_t kIterations = 1 << 22;

__attribute__((target("avx512f"))) double fma_loop_avx512() {
  __m512 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(float(c));
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < kIterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], x, y);
  }
  float lanes[16];
  __m512 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm512_add_ps(sum, acc[c]);
  _mm512_storeu_ps(lanes, sum);
  return lanes[0];
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2() {
  __m256 acc[kChains];
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(float(c));
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < kIterations; ++i) {
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], x, y);
  }
  float lanes[8];
  __m256 sum = acc[0];
  for (int c = 1; c < kChains; ++c) sum = _mm256_add_ps(sum, acc[c]);
  _mm256_storeu_ps(lanes, sum);
  return lanes[0];
}

// GFLOP/s of the FMA loop on `threads` threads at once (each its own loop).
double fma_peak(double (*loop)(), int lanes, int threads) {
  volatile double sink = 0;
#pragma omp parallel num_threads(threads)
  { sink = sink + loop(); }
  const double start = now();
#pragma omp parallel num_threads(threads)
  { sink = sink + loop(); }
  const double elapsed = now() - start;
  return 2.0 * lanes * kChains * double(kIterations) * threads / elapsed / 1e9;
}

std::vector<int> parse_threads(const std::string& list) {
  std::vector<int> threads;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    threads.push_back(std::stoi(item));
    if (threads.back() < 1) throw std::invalid_argument("threads below 1");
  }
  return threads;
}

}  // namespace

int main(int argc, char** argv) {
  std::string openblas, blis, only;
  std::vector<int> thread_counts{1, 2};
  double seconds = 0.2;
  const auto usage = [] {
    std::fprintf(stderr,
                 "usage: gradlab_gemm_bench [--openblas LIB.so] [--blis LIB.so] "
                 "[--threads 1,2] [--seconds S] [--only TEXT]\n");
    return 2;
  };
  if (argc % 2 == 0) {
    std::fprintf(stderr, "gradlab_gemm_bench: %s needs a value\n", argv[argc - 1]);
    return usage();
  }
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    try {
      if (flag == "--openblas") {
        openblas = value;
      } else if (flag == "--blis") {
        blis = value;
      } else if (flag == "--threads") {
        thread_counts = parse_threads(value);
      } else if (flag == "--only") {
        only = value;
      } else if (flag == "--seconds") {
        seconds = std::stod(value);
      } else {
        return usage();
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "gradlab_gemm_bench: %s %s is not a positive number (or list of them)\n",
                   flag.c_str(), value.c_str());
      return usage();
    }
  }

  std::vector<Library> libraries{gradlab_library()};
  if (!openblas.empty()) {
    if (auto library = open_cblas("OpenBLAS", openblas, "openblas_set_num_threads")) {
      libraries.push_back(*library);
    }
  }
  if (!blis.empty()) {
    if (auto library = open_cblas("BLIS", blis, "bli_thread_set_num_threads")) {
      libraries.push_back(*library);
    }
  }
#if defined(GRADLAB_HAVE_LIBXSMM)
  libraries.push_back(libxsmm_library());
#endif

  std::printf("FMA peak, float32, GFLOP/s:");
  const gradlab::Isa processor = gradlab::processor_isa();
  for (const int threads : thread_counts) {
    if (processor >= gradlab::Isa::avx512) {
      std::printf(" AVX-512 %d thread(s) %.0f;", threads, fma_peak(fma_loop_avx512, 16, threads));
    }
    if (processor >= gradlab::Isa::avx2) {
      std::printf(" AVX2 %d thread(s) %.0f;", threads, fma_peak(fma_loop_avx2, 8, threads));
    }
  }
  std::printf("\n\n| product (m x n x k) | threads |");
  for (const Library& library : libraries) std::printf(" %s |", library.name.c_str());
  std::printf("\n|---|---|");
  for (size_t i = 0; i < libraries.size(); ++i) std::printf("---|");
  std::printf("\n");

  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  for (const Shape& shape : all_shapes()) {
    if (shape.name.find(only) == std::string::npos) continue;
    // 64-byte aligned, as a tensor's storage is: where the kernel reads B in place (few rows per
    // thread), a misaligned B costs an extra cache line per k-step that tensors never pay.
    gradlab::Storage a_storage(sizeof(float) * shape.m * shape.k),
        b_storage(sizeof(float) * shape.k * shape.n), c_storage(sizeof(float) * shape.m * shape.n);
    const std::span<float> a(static_cast<float*>(a_storage.data()), shape.m * shape.k),
        b(static_cast<float*>(b_storage.data()), shape.k * shape.n),
        c(static_cast<float*>(c_storage.data()), shape.m * shape.n);
    for (float& x : a) x = normal(rng);
    for (float& x : b) x = normal(rng);
    std::fill(c.begin(), c.end(), 0.0f);
    const double flops = 2.0 * double(shape.m) * double(shape.n) * double(shape.k);
    for (const int threads : thread_counts) {
      std::printf("| %s (%ld x %ld x %ld%s%s) | %d |", shape.name.c_str(), long(shape.m),
                  long(shape.n), long(shape.k), shape.trans_a ? ", A^T" : "",
                  shape.trans_b ? ", B^T" : "", threads);
      for (const Library& library : libraries) {
        omp_set_num_threads(threads);
        library.set_threads(threads);
        const double t =
            seconds_per_call([&] { library.gemm(shape, a.data(), b.data(), c.data()); }, seconds);
        std::printf(" %.0f |", flops / t / 1e9);
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
