// The kernels' variants (autograd/kernels/variants.h): each instruction set this processor has
// computes what the baseline computes, kernel by kernel (the optimizers' updates too), in float64
// (to rounding: the variants differ in vector width, so in the order of their sums, and in fused
// multiply-adds) and the product in float32 too, on sizes that are no multiple of any vector width.
// The rest of the suite checks the kernels against composed ops and references; ctest runs those
// tests once more under each variant (GRADLAB_ISA, tests/CMakeLists.txt). And how GRADLAB_ISA is
// read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/cpu.h"
#include "autograd/kernels/variants.h"

namespace gradlab::kernels {
namespace test_kernel_variants {

constexpr Isa kAll[] = {Isa::baseline, Isa::avx2, Isa::avx512};

template <class T>
std::vector<T> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<T> values(n);
  for (T& v : values) v = static_cast<T>(normal(rng));
  return values;
}

// The largest difference between a and b relative to the largest magnitude in b.
template <class T>
double relative_difference(const std::vector<T>& a, const std::vector<T>& b) {
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return worst / scale;
}

// Every variant above the baseline that this processor runs, with the baseline's table.
std::vector<std::pair<Isa, const KernelVariant*>> variants_to_compare() {
  std::vector<std::pair<Isa, const KernelVariant*>> variants;
  for (const Isa isa : kAll) {
    if (isa != Isa::baseline && kernel_variant(isa) != nullptr) {
      variants.emplace_back(isa, kernel_variant(isa));
    }
  }
  return variants;
}

const KernelVariant& baseline() {
  return *kernel_variant(Isa::baseline);
}

TEST(KernelVariants, EachInstructionSetThisProcessorHasIsAVariantOfItsOwn) {
  const Isa processor = processor_isa();
  for (const Isa isa : kAll) {
    const KernelVariant* variant = kernel_variant(isa);
    EXPECT_EQ(variant != nullptr, isa <= processor) << isa_name(isa);
    if (variant != nullptr && isa != Isa::baseline) {
      EXPECT_NE(variant->f32.gemm, baseline().f32.gemm) << isa_name(isa);
      EXPECT_NE(variant->f64.softmax_rows_forward, baseline().f64.softmax_rows_forward);
    }
  }
  EXPECT_EQ(&active_kernels(), kernel_variant(kernel_isa()));
}

template <class T>
void expect_gemms_agree(const KernelTable<T>& variant, const KernelTable<T>& base, double tolerance,
                        const std::string& name) {
  const int64_t m = 29, n = 37, k = 45, ldc = n + 3;
  for (const bool trans_a : {false, true}) {
    for (const bool trans_b : {false, true}) {
      const std::vector<T> a = random_values<T>(m * k, 1), b = random_values<T>(k * n, 2),
                           bias = random_values<T>(n, 3), c0 = random_values<T>(m * ldc, 4);
      const MatrixRef<T> ra{a.data(), trans_a ? m : k, trans_a};
      const MatrixRef<T> rb{b.data(), trans_b ? k : n, trans_b};
      std::vector<T> got = c0, want = c0;
      variant.gemm(m, n, k, ra, rb, got.data(), ldc, true, bias.data(), false);
      base.gemm(m, n, k, ra, rb, want.data(), ldc, true, bias.data(), false);
      EXPECT_LT(relative_difference(got, want), tolerance)
          << name << " trans_a " << trans_a << " trans_b " << trans_b;
    }
  }
}

TEST(KernelVariants, MatrixProductsAgreeWithTheBaseline) {
  if (variants_to_compare().empty()) GTEST_SKIP() << "this processor runs only the SSE2 variant";
  for (const auto& [isa, variant] : variants_to_compare()) {
    expect_gemms_agree<double>(variant->f64, baseline().f64, 1e-14, isa_name(isa));
    expect_gemms_agree<float>(variant->f32, baseline().f32, 1e-5, isa_name(isa));
  }
}

TEST(KernelVariants, RowKernelsAgreeWithTheBaseline) {
  const Shape shape{3, 37, 5};
  const int64_t size = 3 * 37 * 5;
  const std::vector<double> x = random_values<double>(size, 5), g = random_values<double>(size, 6);
  if (variants_to_compare().empty()) GTEST_SKIP() << "this processor runs only the SSE2 variant";
  for (const auto& [isa, variant] : variants_to_compare()) {
    const KernelTable<double>&v = variant->f64, &b = baseline().f64;
    for (const int64_t axis : {1, 2}) {
      const SoftmaxRows rows(shape, axis);
      const auto expect_agree = [&](const std::vector<double>& got, const std::vector<double>& want,
                                    const char* what) {
        EXPECT_LT(relative_difference(got, want), 1e-14) << isa_name(isa) << ' ' << what;
      };
      std::vector<double> y(size), want_y(size), dx(size), want_dx(size);
      v.softmax_rows_forward(x.data(), y.data(), rows);
      b.softmax_rows_forward(x.data(), want_y.data(), rows);
      expect_agree(y, want_y, "softmax");
      v.softmax_rows_backward(want_y.data(), g.data(), dx.data(), rows);
      b.softmax_rows_backward(want_y.data(), g.data(), want_dx.data(), rows);
      expect_agree(dx, want_dx, "softmax backward");
      v.log_softmax_rows_forward(x.data(), y.data(), rows);
      b.log_softmax_rows_forward(x.data(), want_y.data(), rows);
      expect_agree(y, want_y, "log_softmax");
      v.log_softmax_rows_backward(want_y.data(), g.data(), dx.data(), rows);
      b.log_softmax_rows_backward(want_y.data(), g.data(), want_dx.data(), rows);
      expect_agree(dx, want_dx, "log_softmax backward");
    }

    const int64_t rows = 15, classes = 37;
    std::vector<int64_t> targets(rows);
    for (int64_t i = 0; i < rows; ++i) targets[i] = i % 4 == 3 ? -100 : (i * 11) % classes;
    std::vector<double> got(rows * classes), want(rows * classes);
    const double got_loss =
        v.cross_entropy_forward(x.data(), targets.data(), rows, classes, -100, got.data());
    const double want_loss =
        b.cross_entropy_forward(x.data(), targets.data(), rows, classes, -100, want.data());
    EXPECT_NEAR(got_loss, want_loss, 1e-12 * std::abs(want_loss)) << isa_name(isa);
    EXPECT_LT(relative_difference(got, want), 1e-14) << isa_name(isa);
    std::vector<double> got_dx(rows * classes), want_dx(rows * classes);
    v.cross_entropy_backward(want.data(), targets.data(), rows, classes, -100, 0.3, got_dx.data());
    b.cross_entropy_backward(want.data(), targets.data(), rows, classes, -100, 0.3, want_dx.data());
    EXPECT_LT(relative_difference(got_dx, want_dx), 1e-14) << isa_name(isa);
  }
}

TEST(KernelVariants, LayerNormAndGeluAgreeWithTheBaseline) {
  const int64_t rows = 7, channels = 37, size = rows * channels;
  const std::vector<double> x = random_values<double>(size, 7), g = random_values<double>(size, 8),
                            weight = random_values<double>(channels, 9),
                            bias = random_values<double>(channels, 10);
  if (variants_to_compare().empty()) GTEST_SKIP() << "this processor runs only the SSE2 variant";
  for (const auto& [isa, variant] : variants_to_compare()) {
    const KernelTable<double>&v = variant->f64, &b = baseline().f64;
    for (const bool affine : {true, false}) {
      const double* w = affine ? weight.data() : nullptr;
      std::vector<double> y(size), mean(rows), rstd(rows), want_y(size), want_mean(rows),
          want_rstd(rows);
      v.layer_norm_forward(x.data(), w, affine ? bias.data() : nullptr, 1e-5, rows, channels,
                           y.data(), mean.data(), rstd.data());
      b.layer_norm_forward(x.data(), w, affine ? bias.data() : nullptr, 1e-5, rows, channels,
                           want_y.data(), want_mean.data(), want_rstd.data());
      EXPECT_LT(relative_difference(y, want_y), 1e-13) << isa_name(isa);
      EXPECT_LT(relative_difference(rstd, want_rstd), 1e-13) << isa_name(isa);
      std::vector<double> dx(size), dw(channels), db(channels), want_dx(size), want_dw(channels),
          want_db(channels);
      v.layer_norm_backward(x.data(), g.data(), w, want_mean.data(), want_rstd.data(), rows,
                            channels, dx.data(), dw.data(), db.data());
      b.layer_norm_backward(x.data(), g.data(), w, want_mean.data(), want_rstd.data(), rows,
                            channels, want_dx.data(), want_dw.data(), want_db.data());
      EXPECT_LT(relative_difference(dx, want_dx), 1e-13) << isa_name(isa);
      EXPECT_LT(relative_difference(dw, want_dw), 1e-13) << isa_name(isa);
      EXPECT_LT(relative_difference(db, want_db), 1e-13) << isa_name(isa);
    }
    std::vector<double> y(size), want_y(size), dx(size), want_dx(size);
    v.gelu_forward(x.data(), y.data(), size);
    b.gelu_forward(x.data(), want_y.data(), size);
    EXPECT_LT(relative_difference(y, want_y), 1e-14) << isa_name(isa);
    v.gelu_backward(x.data(), want_y.data(), g.data(), dx.data(), size);
    b.gelu_backward(x.data(), want_y.data(), g.data(), want_dx.data(), size);
    EXPECT_LT(relative_difference(dx, want_dx), 1e-14) << isa_name(isa);
  }
}

TEST(KernelVariants, OptimizerUpdatesAgreeWithTheBaseline) {
  const int64_t n = 101;
  const std::vector<double> p0 = random_values<double>(n, 15), g = random_values<double>(n, 16),
                            m0 = random_values<double>(n, 17);
  std::vector<double> v0 = random_values<double>(n, 18);
  for (double& x : v0) x = x * x;
  const AdamStep<double> adam{0.9, 0.99, 0.1, 0.01, 0.0, 1.0 - 1e-4, 0.3, 1e-8, -0.01};
  const SgdStep<double> sgd{-0.1, 0.01, 0.9, true};
  if (variants_to_compare().empty()) GTEST_SKIP() << "this processor runs only the SSE2 variant";
  for (const auto& [isa, variant] : variants_to_compare()) {
    std::vector<double> p = p0, m = m0, v = v0, want_p = p0, want_m = m0, want_v = v0;
    variant->f64.adam_update(p.data(), g.data(), m.data(), v.data(), n, adam);
    baseline().f64.adam_update(want_p.data(), g.data(), want_m.data(), want_v.data(), n, adam);
    EXPECT_LT(relative_difference(p, want_p), 1e-15) << isa_name(isa);
    EXPECT_LT(relative_difference(m, want_m), 1e-15) << isa_name(isa);
    EXPECT_LT(relative_difference(v, want_v), 1e-15) << isa_name(isa);
    EXPECT_GT(relative_difference(p, p0), 1e-4) << "the update moved nothing";
    p = p0, m = m0, want_p = p0, want_m = m0;
    variant->f64.sgd_update(p.data(), g.data(), m.data(), n, sgd);
    baseline().f64.sgd_update(want_p.data(), g.data(), want_m.data(), n, sgd);
    EXPECT_LT(relative_difference(p, want_p), 1e-15) << isa_name(isa);
    EXPECT_LT(relative_difference(m, want_m), 1e-15) << isa_name(isa);
  }
}

// A vector-aligned buffer of n doubles, as the lane kernel wants for what it saves.
struct AlignedBuffer {
  std::vector<double> storage;
  double* data;
  explicit AlignedBuffer(int64_t n) : storage(n + 8) {
    const auto address = reinterpret_cast<uintptr_t>(storage.data());
    data = storage.data() + (64 - address % 64) % 64 / sizeof(double);
  }
};

TEST(KernelVariants, AttentionKernelsAgreeWithTheBaseline) {
  // B 2, Tq 5, Tk 7, H 4 query heads over KV 2, D 3; causal, with key padding.
  const AttentionDims d{2, 5, 7, 4, 2, 3};
  const std::vector<double> q = random_values<double>(d.B * d.Tq * d.H * d.D, 11),
                            k = random_values<double>(d.B * d.Tk * d.KV * d.D, 12),
                            v = random_values<double>(d.B * d.Tk * d.KV * d.D, 13),
                            g = random_values<double>(d.B * d.Tq * d.H * d.D, 14);
  std::vector<uint8_t> padding(d.B * d.Tk, 0);
  padding[d.Tk + 5] = padding[d.Tk + 6] = 1;
  const AttentionMask mask(d, true, padding.data(), nullptr, Shape{});
  const auto in = separate_operands<const double>(q.data(), k.data(), v.data(), d);
  const double scale = 0.6;
  struct Result {
    std::vector<double> out, dq, dk, dv;
  };
  const auto run = [&](const KernelTable<double>& t, int path) {
    Result r{std::vector<double>(g.size()), std::vector<double>(q.size()),
             std::vector<double>(k.size()), std::vector<double>(v.size())};
    const auto grad = separate_operands<double>(r.dq.data(), r.dk.data(), r.dv.data(), d);
    if (path == 0) {
      std::vector<double> weights(d.B * d.H * d.Tq * d.Tk);
      t.attention_forward(in, d, mask, scale, r.out.data(), weights.data());
      t.attention_backward(g.data(), in, weights.data(), d, mask.causal(), scale, grad);
    } else if (path == 1) {
      std::vector<double> lse(d.B * d.H * d.Tq);
      const AttentionTiles tiles{.query_rows = 2, .keys = 3};
      t.attention_tiles_forward(in, d, mask, scale, r.out.data(), lse.data(), tiles);
      t.attention_tiles_backward(g.data(), in, r.out.data(), lse.data(), d, mask, scale, grad,
                                 tiles);
    } else {
      AlignedBuffer saved(t.attention_lanes_saved_size(d));
      t.attention_lanes_forward(in, d, mask, scale, r.out.data(), nullptr, saved.data);
      t.attention_lanes_backward(g.data(), saved.data, d, true, scale, grad);
    }
    return r;
  };
  const Result want = run(baseline().f64, 0);
  if (variants_to_compare().empty()) GTEST_SKIP() << "this processor runs only the SSE2 variant";
  for (const auto& [isa, variant] : variants_to_compare()) {
    const KernelTable<double>& t = variant->f64;
    ASSERT_TRUE(t.attention_lanes_fit(d)) << isa_name(isa);
    for (const int path : {0, 1, 2}) {
      const Result got = run(t, path);
      const std::string where = isa_name(isa) + " path " + std::to_string(path);
      EXPECT_LT(relative_difference(got.out, want.out), 1e-13) << where;
      EXPECT_LT(relative_difference(got.dq, want.dq), 1e-13) << where;
      EXPECT_LT(relative_difference(got.dk, want.dk), 1e-13) << where;
      EXPECT_LT(relative_difference(got.dv, want.dv), 1e-13) << where;
    }
  }
}

TEST(KernelVariants, GradlabIsaChoosesAVariantAtMostTheProcessors) {
  for (const Isa processor : kAll) {
    EXPECT_EQ(choose_isa(std::nullopt, processor), processor);
    EXPECT_EQ(choose_isa(std::string(), processor), processor);
    for (const Isa isa : kAll) {
      if (isa <= processor) {
        EXPECT_EQ(choose_isa(isa_key(isa), processor), isa);
        continue;
      }
      try {
        choose_isa(isa_key(isa), processor);
        ADD_FAILURE() << isa_key(isa) << " accepted on " << isa_name(processor);
      } catch (const std::runtime_error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("GRADLAB_ISA=" + isa_key(isa)), std::string::npos) << message;
        EXPECT_NE(message.find("it has " + isa_name(processor)), std::string::npos) << message;
      }
    }
  }
  for (const std::string bad : {"AVX2", "sse2", "avx"}) {
    try {
      choose_isa(bad, Isa::avx512);
      ADD_FAILURE() << bad << " accepted";
    } catch (const std::runtime_error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("use avx512, avx2 or baseline"), std::string::npos) << message;
    }
  }
}

}  // namespace test_kernel_variants
}  // namespace gradlab::kernels
