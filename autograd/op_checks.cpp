// One gradient check per op, never with two equal sizes in one tensor where the op could confuse
// the axes. Most use sizes 2, 3, 5 and 7 (1 for an axis that broadcasts); the attention and
// layer-norm checks use other sizes as well, to reach their kernels' edges (lane groups, the 64
// keys of the lane kernel, 64-row blocks, whole vectors and a tail). Inputs of ops with kinks or
// restricted domains are kept away from them (relu at 0, log of a negative number).
#include "autograd/op_checks.h"

#include <cmath>

#include "autograd/attention.h"
#include "autograd/ops.h"

namespace gradlab {
namespace {

using Inputs = std::vector<Tensor>;

Tensor normal(Generator& gen, const Shape& shape) {
  return Tensor::randn(shape, gen, DType::Float64);
}

Tensor positive(Generator& gen, const Shape& shape) {
  return Tensor::uniform(shape, gen, 0.5, 2.0, DType::Float64);
}

// Normal values pushed at least 0.2 away from zero, clear of kinks for a 1e-6 step.
Tensor away_from_zero(Generator& gen, const Shape& shape) {
  Tensor t = normal(gen, shape);
  double* v = t.mutable_data<double>();
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = std::copysign(0.2 + std::abs(v[i]), v[i]);
  return t;
}

Mask random_mask(Generator& gen, const Shape& shape) {
  std::vector<uint8_t> values(numel(shape));
  for (uint8_t& v : values) v = gen.uniform() < 0.5;
  return Mask(shape, values);
}

// Shorthand for checks whose inputs are all standard normal.
OpCheck normal_check(std::string name, std::vector<Shape> shapes, GradcheckFn fn) {
  return {std::move(name),
          [shapes](Generator& gen) {
            Inputs inputs;
            for (const Shape& s : shapes) inputs.push_back(normal(gen, s));
            return inputs;
          },
          std::move(fn),
          {}};
}

std::vector<OpCheck> make_checks() {
  std::vector<OpCheck> checks;
  auto add_check = [&](OpCheck c) { checks.push_back(std::move(c)); };

  // Element-wise, with broadcasting on both sides.
  add_check(normal_check("add", {{2, 3, 5}, {3, 1}}, [](const Inputs& x) { return x[0] + x[1]; }));
  add_check(normal_check("sub", {{3, 1}, {2, 3, 5}}, [](const Inputs& x) { return x[0] - x[1]; }));
  add_check(
      normal_check("mul", {{2, 3, 5}, {2, 1, 5}}, [](const Inputs& x) { return x[0] * x[1]; }));
  add_check({"div",
             [](Generator& gen) {
               return Inputs{normal(gen, {2, 3, 5}), positive(gen, {5})};
             },
             [](const Inputs& x) { return x[0] / x[1]; },
             {}});
  add_check(normal_check("add_scalar", {{3, 5}}, [](const Inputs& x) { return x[0] + 2.5; }));
  add_check(normal_check("mul_scalar", {{3, 5}}, [](const Inputs& x) { return x[0] * -1.5; }));
  add_check(normal_check("rsub_scalar", {{3, 5}}, [](const Inputs& x) { return 2.0 - x[0]; }));
  add_check({"rdiv_scalar",
             [](Generator& gen) {
               return Inputs{positive(gen, {3, 5})};
             },
             [](const Inputs& x) { return 3.0 / x[0]; },
             {}});
  add_check(normal_check("neg", {{3, 5}}, [](const Inputs& x) { return -x[0]; }));
  add_check(normal_check("pow", {{3, 5}}, [](const Inputs& x) { return pow(x[0], 3.0); }));
  add_check({"pow_fractional",
             [](Generator& gen) {
               return Inputs{positive(gen, {3, 5})};
             },
             [](const Inputs& x) { return pow(x[0], -1.5); },
             {}});
  add_check(normal_check("exp", {{3, 5}}, [](const Inputs& x) { return exp(x[0]); }));
  add_check({"log",
             [](Generator& gen) {
               return Inputs{positive(gen, {3, 5})};
             },
             [](const Inputs& x) { return log(x[0]); },
             {}});
  add_check({"sqrt",
             [](Generator& gen) {
               return Inputs{positive(gen, {3, 5})};
             },
             [](const Inputs& x) { return sqrt(x[0]); },
             {}});
  add_check(normal_check("tanh", {{3, 5}}, [](const Inputs& x) { return tanh(x[0]); }));
  add_check({"relu",
             [](Generator& gen) {
               return Inputs{away_from_zero(gen, {3, 5})};
             },
             [](const Inputs& x) { return relu(x[0]); },
             {}});
  add_check(normal_check("gelu", {{3, 5}}, [](const Inputs& x) { return gelu(x[0]); }));

  // Reductions.
  add_check(normal_check("sum", {{2, 3, 5}}, [](const Inputs& x) { return sum(x[0]); }));
  add_check(normal_check("sum_axes", {{2, 3, 5, 7}}, [](const Inputs& x) {
    return sum(x[0], {0, 2});
  }));
  add_check(normal_check("sum_keepdim", {{2, 3, 5}},
                         [](const Inputs& x) { return sum(x[0], {-2}, true); }));
  add_check(normal_check("mean", {{2, 3, 5}}, [](const Inputs& x) { return mean(x[0]); }));
  add_check(normal_check("mean_axes", {{2, 3, 5}},
                         [](const Inputs& x) { return mean(x[0], {-1}, true); }));
  add_check(normal_check("max", {{2, 3, 5}}, [](const Inputs& x) { return max(x[0], 1); }));
  add_check(normal_check("broadcast_to", {{3, 1}}, [](const Inputs& x) {
    return broadcast_to(x[0], {2, 3, 5});
  }));
  add_check(normal_check("sum_to", {{2, 3, 5}}, [](const Inputs& x) {
    return sum_to(x[0], {3, 1});
  }));

  // Products.
  add_check(
      normal_check("matmul", {{3, 5}, {5, 7}}, [](const Inputs& x) { return matmul(x[0], x[1]); }));
  add_check(normal_check("matmul_batched", {{2, 3, 5}, {2, 5, 7}},
                         [](const Inputs& x) { return matmul(x[0], x[1]); }));
  add_check(normal_check("matmul_broadcast", {{2, 1, 3, 5}, {4, 5, 7}},
                         [](const Inputs& x) { return matmul(x[0], x[1]); }));
  add_check(normal_check("matmul_weight", {{2, 3, 5}, {5, 7}},
                         [](const Inputs& x) { return matmul(x[0], x[1]); }));

  add_check(normal_check("linear", {{2, 3, 5}, {7, 5}, {7}},
                         [](const Inputs& x) { return linear(x[0], x[1], x[2]); }));
  add_check(normal_check("linear_no_bias", {{3, 5}, {7, 5}},
                         [](const Inputs& x) { return linear(x[0], x[1], Tensor()); }));

  // Shape ops.
  add_check(normal_check("reshape", {{2, 3, 5}}, [](const Inputs& x) {
    return reshape(x[0], {5, -1});
  }));
  add_check(normal_check("transpose", {{2, 3, 5, 7}},
                         [](const Inputs& x) { return transpose(x[0], 1, 2); }));
  add_check(normal_check("permute", {{2, 3, 5}}, [](const Inputs& x) {
    return permute(x[0], {2, 0, 1});
  }));
  add_check(normal_check("concat", {{2, 3, 5}, {2, 4, 5}}, [](const Inputs& x) {
    return concat({x[0], x[1]}, 1);
  }));
  add_check(
      normal_check("narrow", {{2, 7, 5}}, [](const Inputs& x) { return narrow(x[0], 1, 2, 3); }));

  // Softmax family.
  add_check(
      normal_check("softmax", {{2, 3, 5}}, [](const Inputs& x) { return softmax(x[0], -1); }));
  add_check(
      normal_check("softmax_axis1", {{2, 3, 5}}, [](const Inputs& x) { return softmax(x[0], 1); }));
  add_check(normal_check("log_softmax", {{2, 3, 5}},
                         [](const Inputs& x) { return log_softmax(x[0], -1); }));
  add_check(normal_check("log_softmax_axis0", {{3, 2, 5}},
                         [](const Inputs& x) { return log_softmax(x[0], 0); }));
  add_check(normal_check("cross_entropy", {{2, 3, 7}}, [](const Inputs& x) {
    return cross_entropy(x[0], Indices({2, 3}, {0, 6, -100, 3, 3, 1}));
  }));

  // Fused attention: q [B, Tq, H, D], k and v [B, Tk, KV, D] with grouped K/V heads.
  add_check(normal_check(
      "fused_attention", {{3, 5, 4, 6}, {3, 7, 2, 6}, {3, 7, 2, 6}}, [](const Inputs& x) {
        std::vector<uint8_t> pad(21, 0);
        pad[6] = pad[20] = 1;  // the last key of two sequences
        const Mask padding({3, 7}, pad);
        return fused_attention(x[0], x[1], x[2], {.causal = true, .key_padding = &padding}, 0.6)
            .output;
      }));

  // The same on one packed buffer [B, T, H + 2 KV, D]: H = 4, KV = 2.
  add_check(normal_check("fused_attention_packed", {{3, 5, 8, 6}}, [](const Inputs& x) {
    std::vector<uint8_t> pad(15, 0);
    pad[4] = pad[13] = 1;
    const Mask padding({3, 5}, pad);
    return fused_attention_packed(x[0], 4, 2, {.causal = true, .key_padding = &padding}, 0.6)
        .output;
  }));

  // An explicit per-head mask (one query of head 1 sees nothing), with more query heads (8)
  // than a float64 vector has lanes under AVX-512 (8): two lane groups.
  add_check(normal_check(
      "fused_attention_attn_mask", {{3, 4, 8, 5}, {3, 6, 4, 5}, {3, 6, 4, 5}}, [](const Inputs& x) {
        std::vector<uint8_t> hidden(8 * 4 * 6);
        for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = (i * 5 + i / 4) % 7 == 0;
        std::fill_n(hidden.begin() + 4 * 6 + 2 * 6, 6, 1);
        const Mask mask({8, 4, 6}, hidden);
        return fused_attention(x[0], x[1], x[2], {.attn_mask = &mask}, 0.8).output;
      }));

  // 66 keys: past the lane kernel's 64, the one GEMM per head (autograd/kernels/attention.h).
  add_check(normal_check("fused_attention_long_keys", {{2, 3, 4, 5}, {2, 66, 1, 5}, {2, 66, 1, 5}},
                         [](const Inputs& x) {
                           std::vector<uint8_t> pad(2 * 66, 0);
                           pad[65] = pad[70] = 1;
                           const Mask padding({2, 66}, pad);
                           return fused_attention(x[0], x[1], x[2],
                                                  {.causal = true, .key_padding = &padding}, 0.6)
                               .output;
                         }));

  // Causal self-attention on 256 positions, packed, without the weights: the tiled kernel
  // (autograd/kernels/attention_tiles.h). Its tests with small tiles cover the other masks.
  add_check(normal_check("fused_attention_tiles_causal", {{1, 256, 3, 2}}, [](const Inputs& x) {
    return fused_attention_packed(x[0], 1, 1, {.causal = true}, 0.7, /*need_weights=*/false).output;
  }));

  // Normalisation.
  add_check(normal_check("layer_norm", {{2, 3, 5}, {5}, {5}},
                         [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); }));
  // 70 rows: the backward sums the weight and bias gradients in blocks of 64 rows.
  add_check(normal_check("layer_norm_row_blocks", {{5, 14, 3}, {3}, {3}},
                         [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); }));
  // Rows of 19 channels: the row sums' whole vectors (8 doubles) and a tail.
  add_check(normal_check("layer_norm_vectors_and_tail", {{3, 13, 19}, {19}, {19}},
                         [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); }));
  add_check(normal_check("layer_norm_plain", {{3, 7}},
                         [](const Inputs& x) { return layer_norm(x[0], Tensor(), Tensor()); }));

  // Indexing and masking.
  add_check(normal_check("embedding", {{7, 5}}, [](const Inputs& x) {
    return embedding(x[0], Indices({2, 3}, {4, 0, 4, 6, 1, 4}));
  }));
  add_check({"masked_fill",
             [](Generator& gen) {
               return Inputs{normal(gen, {2, 3, 5})};
             },
             [](const Inputs& x) {
               Generator mask_gen(7);
               return masked_fill(x[0], random_mask(mask_gen, {3, 5}), -2.0);
             },
             {}});
  add_check({"where",
             [](Generator& gen) {
               return Inputs{normal(gen, {2, 3, 5}), normal(gen, {3, 5})};
             },
             [](const Inputs& x) {
               Generator mask_gen(11);
               return where(random_mask(mask_gen, {2, 1, 5}), x[0], x[1]);
             },
             {}});
  // The condition read from a comparison of a itself: a's values stay 0.2 away from the step,
  // and the condition [2, 1, 5] broadcasts against a [2, 3, 5] and b [3, 5].
  add_check(
      {"where_condition",
       [](Generator& gen) {
         return Inputs{away_from_zero(gen, {2, 3, 5}), normal(gen, {3, 5})};
       },
       [](const Inputs& x) { return where(greater(narrow(x[0], 1, 0, 1), 0.0), x[0], x[1] * 2.0); },
       {}});
  add_check(normal_check("dropout", {{2, 3, 5}}, [](const Inputs& x) {
    Generator dropout_gen(3);  // the same mask on every evaluation
    return dropout(x[0], 0.3, true, dropout_gen);
  }));
  return checks;
}

}  // namespace

const std::vector<OpCheck>& op_checks() {
  static const std::vector<OpCheck> checks = make_checks();
  return checks;
}

}  // namespace gradlab
