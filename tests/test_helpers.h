// Small assertions and command-line helpers shared by several test files.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "nn/module.h"

namespace gradlab::testing {

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

}  // namespace gradlab::testing
