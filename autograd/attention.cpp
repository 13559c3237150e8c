// Fused attention: shape checks, the choice between the three kernels (kernels/attention.h, one
// GEMM per head; kernels/attention_lanes.h, one SIMD lane per head; kernels/attention_tiles.h,
// tiles of keys for long sequences) and the backward closure that calls the chosen kernel's
// backward, for three operands or one packed buffer.
#include "autograd/attention.h"

#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "autograd/graph.h"
#include "autograd/kernels/attention.h"
#include "autograd/kernels/attention_lanes.h"
#include "autograd/kernels/attention_tiles.h"

namespace gradlab {
namespace {

using Dims = kernels::AttentionDims;
template <class T>
using Operands = kernels::AttentionOperands<T>;

void check_masks(const Dims& d, const AttentionMaskSpec& m) {
  if (m.key_padding && m.key_padding->shape != Shape{d.B, d.Tk}) {
    throw ShapeError("fused_attention: key_padding_mask " + to_string(m.key_padding->shape) +
                     " does not match [B, Tk] = " + to_string({d.B, d.Tk}));
  }
  const Shape full{d.B, d.H, d.Tq, d.Tk};
  if (m.attn_mask && broadcast_shapes("fused_attention", m.attn_mask->shape, full) != full) {
    throw ShapeError("fused_attention: attn_mask " + to_string(m.attn_mask->shape) +
                     " does not broadcast to [B, H, Tq, Tk] = " + to_string(full));
  }
}

Dims check_shapes(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMaskSpec& m) {
  auto fail = [&](const std::string& why) {
    throw ShapeError("fused_attention: " + why + ": q " + to_string(q.shape()) + " (B,Tq,H,D), k " +
                     to_string(k.shape()) + ", v " + to_string(v.shape()) + " (B,Tk,KV,D)");
  };
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4) fail("operands must have rank 4");
  if (k.shape() != v.shape()) fail("k and v differ");
  const Dims d{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3)};
  if (k.size(0) != d.B || k.size(3) != d.D) fail("batch or head size differs");
  if (d.KV == 0 || d.H % d.KV != 0) fail("K/V heads do not divide query heads");
  check_same_dtype("fused_attention", q.dtype(), k.dtype());
  check_same_dtype("fused_attention", q.dtype(), v.dtype());
  check_masks(d, m);
  return d;
}

Dims check_packed_shape(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                        const AttentionMaskSpec& m) {
  if (qkv.rank() != 4 || num_heads <= 0 || num_kv_heads <= 0 || num_heads % num_kv_heads != 0 ||
      qkv.size(2) != num_heads + 2 * num_kv_heads) {
    throw ShapeError("fused_attention_packed: qkv " + to_string(qkv.shape()) +
                     " is not [B, T, H + 2 KV, D] with H = " + std::to_string(num_heads) +
                     " query heads and KV = " + std::to_string(num_kv_heads) +
                     " K/V heads dividing them");
  }
  const Dims d{qkv.size(0), qkv.size(1), qkv.size(1), num_heads, num_kv_heads, qkv.size(3)};
  check_masks(d, m);
  return d;
}

// The masks as the kernels read them; they point into `spec`'s arrays.
kernels::AttentionMask mask_of(const AttentionMaskSpec& spec, const Dims& d) {
  return kernels::AttentionMask(d, spec.causal,
                                spec.key_padding ? spec.key_padding->values.data() : nullptr,
                                spec.attn_mask ? spec.attn_mask->values.data() : nullptr,
                                spec.attn_mask ? spec.attn_mask->shape : Shape{});
}

// The masks' arrays, copied for a backward that runs after the caller's arrays are gone.
struct MaskCopy {
  bool causal;
  std::optional<Mask> key_padding, attn_mask;

  explicit MaskCopy(const AttentionMaskSpec& spec) : causal(spec.causal) {
    if (spec.key_padding) key_padding = *spec.key_padding;
    if (spec.attn_mask) attn_mask = *spec.attn_mask;
  }
  AttentionMaskSpec spec() const {
    return {causal, key_padding ? &*key_padding : nullptr, attn_mask ? &*attn_mask : nullptr};
  }
};

enum class Kernel { Lanes, Heads, Tiles };

// Runs the forward pass on the operands `layout` finds in `inputs`, and records a backward that
// writes their gradients in the same layout.
template <class Layout>
FusedAttention run(const std::vector<Tensor>& inputs, const Dims& d, const AttentionMaskSpec& mask,
                   double scale, bool need_weights, Layout layout) {
  const Tensor& first = inputs.front();
  const kernels::AttentionMask view = mask_of(mask, d);
  Kernel kernel = Kernel::Heads;
  int64_t saved_size = 0;
  dispatch(first.dtype(), [&]<class T>() {
    if (kernels::attention_lanes_fit<T>(d)) {
      kernel = Kernel::Lanes;
      saved_size = kernels::attention_lanes_saved_size<T>(d);
    } else if (!need_weights && kernels::attention_tiles_fit(d, mask.causal)) {
      kernel = Kernel::Tiles;
      saved_size = d.B * d.H * d.Tq;
    }
  });
  Tensor out = Tensor::empty({d.B, d.Tq, d.H, d.D}, first.dtype());
  // The per-head kernel's backward reads the weights; the lane kernel's reads what it saved; the
  // tiled kernel's reads each row's log-sum-exp (and the output).
  Tensor weights = need_weights || kernel == Kernel::Heads
                       ? Tensor::empty({d.B, d.H, d.Tq, d.Tk}, first.dtype())
                       : Tensor();
  Tensor saved = kernel == Kernel::Heads ? weights : Tensor::empty({saved_size}, first.dtype());
  dispatch(first.dtype(), [&]<class T>() {
    const auto operands = layout.template of<const T>(inputs);
    const T s = static_cast<T>(scale);
    T* w = weights.defined() ? weights.mutable_data<T>() : nullptr;
    switch (kernel) {
      case Kernel::Lanes:
        kernels::attention_lanes_forward<T>(operands, d, view, s, out.mutable_data<T>(), w,
                                            saved.mutable_data<T>());
        break;
      case Kernel::Heads:
        kernels::attention_forward<T>(operands, d, view, s, out.mutable_data<T>(), w);
        break;
      case Kernel::Tiles:
        kernels::attention_tiles_forward<T>(operands, d, view, s, out.mutable_data<T>(),
                                            saved.mutable_data<T>());
        break;
    }
  });
  // The tiled kernel's backward needs the output and the masks again.
  const Tensor out_values = kernel == Kernel::Tiles ? out.detach() : Tensor();
  const auto masks = kernel == Kernel::Tiles ? std::make_shared<const MaskCopy>(mask) : nullptr;
  out = record<"fused_attention">(
      out, inputs,
      [inputs, saved, kernel, out_values, masks, d, causal = mask.causal, scale,
       layout](const Tensor& g) {
        std::vector<Tensor> grads;
        for (const Tensor& input : inputs)
          grads.push_back(Tensor::empty(input.shape(), input.dtype()));
        dispatch(g.dtype(), [&]<class T>() {
          const auto grad_operands = layout.template of<T>(grads);
          const auto operands = layout.template of<const T>(inputs);
          const T s = static_cast<T>(scale);
          switch (kernel) {
            case Kernel::Lanes:
              kernels::attention_lanes_backward<T>(g.data<T>(), saved.data<T>(), d, causal, s,
                                                   grad_operands);
              break;
            case Kernel::Heads:
              kernels::attention_backward<T>(g.data<T>(), operands, saved.data<T>(), d, causal, s,
                                             grad_operands);
              break;
            case Kernel::Tiles:
              kernels::attention_tiles_backward<T>(g.data<T>(), operands, out_values.data<T>(),
                                                   saved.data<T>(), d, mask_of(masks->spec(), d), s,
                                                   grad_operands);
              break;
          }
        });
        return grads;
      });
  return {out, need_weights ? weights : Tensor()};
}

// A tensor's values as the kernels take them: T = const float reads (the inputs, which may be
// const tensors), T = float writes (the gradients); the same for double.
template <class T>
T* values_of(std::conditional_t<std::is_const_v<T>, const Tensor&, Tensor&> t) {
  if constexpr (std::is_const_v<T>) {
    return t.template data<std::remove_const_t<T>>();
  } else {
    return t.template mutable_data<T>();
  }
}

struct SeparateLayout {
  Dims d;
  template <class T, class Tensors>
  Operands<T> of(Tensors& t) const {
    return kernels::separate_operands<T>(values_of<T>(t[0]), values_of<T>(t[1]), values_of<T>(t[2]),
                                         d);
  }
};

struct PackedLayout {
  Dims d;
  template <class T, class Tensors>
  Operands<T> of(Tensors& t) const {
    return kernels::packed_operands<T>(values_of<T>(t[0]), d);
  }
};

}  // namespace

FusedAttention fused_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                               const AttentionMaskSpec& mask, double scale, bool need_weights) {
  const Dims d = check_shapes(q, k, v, mask);
  return run({q, k, v}, d, mask, scale, need_weights, SeparateLayout{d});
}

FusedAttention fused_attention_packed(const Tensor& qkv, int64_t num_heads, int64_t num_kv_heads,
                                      const AttentionMaskSpec& mask, double scale,
                                      bool need_weights) {
  const Dims d = check_packed_shape(qkv, num_heads, num_kv_heads, mask);
  return run({qkv}, d, mask, scale, need_weights, PackedLayout{d});
}

}  // namespace gradlab
