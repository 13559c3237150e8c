// Small assertions and command-line helpers shared by several test files.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/tensor.h"
#include "autograd/threads.h"
#include "nn/module.h"
#include "nn/sequence_model.h"

namespace gradlab::testing {

// The calling thread's op threads (set_threads) for a scope, restored at its end.
class ThreadCount {
 public:
  explicit ThreadCount(int count) : saved_(threads()) { set_threads(count); }
  ~ThreadCount() { set_threads(saved_); }

 private:
  int saved_;
};

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// A command line with more arguments at its end.
inline std::vector<std::string> with(std::vector<std::string> args,
                                     const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Defined, of this shape, and every value exactly equal (small integers and dyadic fractions,
// which both dtypes hold without rounding).
inline void expect_exact(const Tensor& t, const Shape& shape, const std::vector<double>& values) {
  ASSERT_TRUE(t.defined());
  ASSERT_EQ(t.shape(), shape);
  const std::vector<double> got = t.to_vector();
  ASSERT_EQ(got.size(), values.size());
  for (size_t i = 0; i < values.size(); ++i) EXPECT_EQ(got[i], values[i]) << "at flat index " << i;
}

// Bounds for allclose: |actual - expected| <= atol + rtol * |expected| everywhere.
struct Tolerance {
  double rtol, atol;
};

// Defined, of the expected shape, and allclose within tol; `what` names the tensor.
inline void expect_close(const Tensor& actual, const Tensor& expected, Tolerance tol,
                         const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << " is undefined";
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  EXPECT_TRUE(allclose(actual, expected, tol.rtol, tol.atol))
      << what << "\nactual:   " << actual << "\nexpected: " << expected;
}

// Same names in the same order, same shapes and dtypes, and the same bytes.
inline void expect_identical(const std::vector<nn::NamedTensor>& got,
                             const std::vector<nn::NamedTensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const Tensor& a = got[i].second;
    const Tensor& b = want[i].second;
    EXPECT_EQ(got[i].first, want[i].first);
    ASSERT_EQ(a.shape(), b.shape()) << want[i].first;
    ASSERT_EQ(a.dtype(), b.dtype()) << want[i].first;
    const size_t bytes = static_cast<size_t>(b.numel()) * dtype_size(b.dtype());
    EXPECT_EQ(std::memcmp(a.node()->storage->data(), b.node()->storage->data(), bytes), 0)
        << want[i].first << " differs";
  }
}

// The model table's kinds that read tokens (all but the toy model of superposition, which reads
// feature vectors).
inline std::vector<std::string> token_model_kinds() {
  std::vector<std::string> kinds;
  for (const std::string& kind : nn::model_kinds()) {
    try {
      nn::positions_needed(kind, 1, 1);
      kinds.push_back(kind);
    } catch (const ConfigError&) {
    }
  }
  return kinds;
}

}  // namespace gradlab::testing
