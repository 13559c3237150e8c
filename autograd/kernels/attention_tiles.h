// Fused attention over tiles of keys, for long sequences: memory linear in the sequence length.
// The per-head kernel (attention.h) writes each head's [Tq, Tk] weights out and its backward
// reads them back, so its memory grows with Tq x Tk. This one never holds more than one tile of
// scores per thread, as FlashAttention does:
//
// - Forward, per (batch, head) and block of query rows: for each tile of keys, the scores
//   S = Q K^T * scale, masked; the running maximum m and sum l of each row's exponentials are
//   updated and the partial output rescaled by exp(m_old - m_new) before P V is added
//   (an online softmax). At the end out = acc / l, and each row keeps only
//   lse = m + log(l), the log of its softmax's denominator.
// - Backward, per (batch, K/V head): each tile's weights are recomputed from the scores and
//   lse (P = exp(S - lse)), then dV += P^T dO, dP = dO V^T, dS = P * (dP - delta) * scale with
//   delta = rowsum(dO * out), dQ += dS K, dK += dS^T Q.
//
// Under the causal rule the tiles wholly above the diagonal are skipped. A fully masked row
// gives zero output and zero gradients (its lse is -inf). Shapes, layouts and masks as in
// attention_parts.h; results equal the per-head kernel's up to rounding (the sums over keys run
// tile by tile). The op (autograd/attention.cpp) takes this kernel for long key sequences when
// the weights are not asked for.
#pragma once

#include "autograd/kernels/attention_parts.h"

namespace gradlab::kernels {

// The fewest keys for which the op takes this kernel when the weights are not asked for: under
// the causal rule 256, where skipping the tiles above the diagonal already pays for recomputing the
// weights in the backward (seven products of Tq x Tk x D instead of the per-head kernel's six);
// without it 1024, where the per-head kernel's [Tq, Tk] weights start to cost more
// memory than the recomputation costs time, and at 4096 keys (512 MiB of weights at C = 256 with
// 8 heads) no longer stay in any cache. The crossovers are measured (BENCHMARKS.md, "Attention";
// tests pin the rule).
inline int64_t attention_tiles_min_keys(bool causal) {
  return causal ? 256 : 1024;
}

inline bool attention_tiles_fit(const AttentionDims& d, bool causal) {
  return d.Tk >= attention_tiles_min_keys(causal);
}

// Query rows and keys per tile: a 128 x 256 float tile of scores is 128 KiB, next to the same
// of its gradient, in the second-level cache; smaller tiles measured slower. Tests pass small
// ones so that small problems cross many tiles.
struct AttentionTiles {
  int64_t query_rows = 128;
  int64_t keys = 256;
};

// out [B, Tq, H, D] and lse [B, H, Tq] (the log of each row's softmax denominator; -inf for a
// fully masked row) from the operands in `in`.
template <class T>
void attention_tiles_forward(const AttentionOperands<const T>& in, const AttentionDims& d,
                             const AttentionMask& mask, T scale, T* out, T* lse,
                             const AttentionTiles& tiles = {});

// The gradients of Q, K and V into `grad` (laid out as `in`), from g = dL/dout [B, Tq, H, D],
// the inputs, and the forward's out and lse.
template <class T>
void attention_tiles_backward(const T* g, const AttentionOperands<const T>& in, const T* out,
                              const T* lse, const AttentionDims& d, const AttentionMask& mask,
                              T scale, const AttentionOperands<T>& grad,
                              const AttentionTiles& tiles = {});

}  // namespace gradlab::kernels
