// The per-head attention kernel (autograd/kernels/attention.h) runs causal attention in blocks
// of query rows whose products stop at the last key the block sees. Every term it skips is an
// exact zero, so it must give the bits of the whole products, which the same rule written as an
// explicit mask still runs: output, weights and the gradients of Q, K and V, in float and double,
// with sequences that end inside a block, more keys than queries and fewer, grouped K/V heads
// and key padding on top (one row fully masked).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "autograd/kernels/attention.h"
#include "autograd/random.h"

namespace gradlab::kernels {
namespace test_attention_causal_blocks {

template <class T>
struct Run {
  std::vector<T> out, weights, dq, dk, dv;
};

template <class T>
Run<T> run(const AttentionDims& d, bool causal_rule, bool padded) {
  Generator gen(17);
  auto values = [&](int64_t n) {
    std::vector<T> v(n);
    for (T& x : v) x = static_cast<T>(gen.normal());
    return v;
  };
  const std::vector<T> q = values(d.B * d.Tq * d.H * d.D), k = values(d.B * d.Tk * d.KV * d.D),
                       v = values(d.B * d.Tk * d.KV * d.D), g = values(d.B * d.Tq * d.H * d.D);
  std::vector<uint8_t> padding(d.B * d.Tk, 0);
  // Batch entry 0's first key (its query 0 then sees nothing: a fully masked row) and middle
  // key, and the last entry's second key.
  if (padded) padding[0] = padding[d.Tk / 2] = padding[(d.B - 1) * d.Tk + 1] = 1;
  // The causal rule as an explicit [Tq, Tk] mask: key j hidden from query i when j > i.
  std::vector<uint8_t> later(d.Tq * d.Tk);
  for (int64_t i = 0; i < d.Tq; ++i)
    for (int64_t j = 0; j < d.Tk; ++j) later[i * d.Tk + j] = j > i;
  const AttentionMask mask(d, causal_rule, padded ? padding.data() : nullptr,
                           causal_rule ? nullptr : later.data(), Shape{d.Tq, d.Tk});
  const T scale = T(0.45);
  Run<T> r{std::vector<T>(g.size()), std::vector<T>(d.B * d.H * d.Tq * d.Tk),
           std::vector<T>(q.size()), std::vector<T>(k.size()), std::vector<T>(v.size())};
  const auto in = separate_operands<const T>(q.data(), k.data(), v.data(), d);
  attention_forward<T>(in, d, mask, scale, r.out.data(), r.weights.data());
  attention_backward<T>(g.data(), in, r.weights.data(), d, causal_rule, scale,
                        separate_operands<T>(r.dq.data(), r.dk.data(), r.dv.data(), d));
  return r;
}

template <class T>
void expect_same_bits(const char* what, const std::vector<T>& blocks, const std::vector<T>& whole) {
  ASSERT_EQ(blocks.size(), whole.size());
  for (size_t i = 0; i < blocks.size(); ++i)
    ASSERT_EQ(blocks[i], whole[i]) << what << " differs at element " << i;
}

template <class T>
void expect_blocks_give_whole_products(const AttentionDims& d) {
  for (bool padded : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "Tq " << d.Tq << " Tk " << d.Tk << " padded " << padded);
    const Run<T> blocks = run<T>(d, /*causal_rule=*/true, padded);
    const Run<T> whole = run<T>(d, /*causal_rule=*/false, padded);
    expect_same_bits("output", blocks.out, whole.out);
    expect_same_bits("weights", blocks.weights, whole.weights);
    expect_same_bits("dQ", blocks.dq, whole.dq);
    expect_same_bits("dK", blocks.dk, whole.dk);
    expect_same_bits("dV", blocks.dv, whole.dv);
  }
}

// B, Tq, Tk, H, KV, D: 37 positions end inside the third 16-row block; 21 queries over 40 keys
// leave keys no query sees; 40 queries over 21 keys, blocks that see every key.
const AttentionDims kShapes[] = {
    {2, 37, 37, 4, 2, 5}, {3, 21, 40, 2, 1, 6}, {2, 40, 21, 3, 3, 4}, {1, 64, 64, 2, 2, 8}};

TEST(FusedAttentionCausalBlocks, GiveTheBitsOfTheWholeProductsInDouble) {
  for (const AttentionDims& d : kShapes) expect_blocks_give_whole_products<double>(d);
}

TEST(FusedAttentionCausalBlocks, GiveTheBitsOfTheWholeProductsInFloat) {
  for (const AttentionDims& d : kShapes) expect_blocks_give_whole_products<float>(d);
}

}  // namespace test_attention_causal_blocks
}  // namespace gradlab::kernels
