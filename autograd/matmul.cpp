// matmul: forward and backward are the same batched GEMM with transpose flags, so no
// transposed copy is ever materialised.
#include "autograd/matmul.h"

#include "autograd/graph.h"
#include "autograd/kernels/elementwise.h"
#include "autograd/kernels/gemm.h"
#include "autograd/reduce.h"
#include "autograd/shape_ops.h"

namespace gradlab {
namespace {

Shape batch_of(const Shape& s) {
  return Shape(s.begin(), s.end() - 2);
}

// Rows of x viewed as a matrix over its last axis (explicit, so an empty last axis works).
int64_t leading_rows(const Tensor& x) {
  return numel(Shape(x.shape().begin(), x.shape().end() - 1));
}

// op(a) @ op(b) (+ bias [N] on every row, if given) over broadcast batch axes; no graph.
// Shapes are already validated.
Tensor batched_product(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b,
                       const Tensor* bias = nullptr) {
  const int64_t ra = a.rank(), rb = b.rank();
  const int64_t m = trans_a ? a.shape()[ra - 1] : a.shape()[ra - 2];
  const int64_t k = trans_a ? a.shape()[ra - 2] : a.shape()[ra - 1];
  const int64_t n = trans_b ? b.shape()[rb - 2] : b.shape()[rb - 1];
  const Shape batch = broadcast_shapes("matmul", batch_of(a.shape()), batch_of(b.shape()));
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = Tensor::empty(out_shape, a.dtype());

  const Shape a_strides = broadcast_strides(batch_of(a.shape()), batch);
  const Shape b_strides = broadcast_strides(batch_of(b.shape()), batch);
  const int64_t count = numel(batch);
  // One large product: split its rows across threads. Many products: a thread per product,
  // each single-threaded. Small work stays on one thread either way.
  const bool parallel = count * m * n * k > kernels::kParallelGemmFlops;
  dispatch(a.dtype(), [&]<class T>() {
    const T* ap = a.data<T>();
    const T* bp = b.data<T>();
    T* op = out.mutable_data<T>();
    const T* bias_p = bias ? bias->data<T>() : nullptr;
    if (count == 1) {
      // Not inside the loop's parallel region below, even an inactive one: a parallel region
      // nested in it gets a freshly created thread (one per product) instead of the pool's.
      kernels::gemm<T>(m, n, k, {ap, trans_a ? m : k, trans_a}, {bp, trans_b ? k : n, trans_b}, op,
                       n, /*accumulate=*/false, bias_p, parallel);
      return;
    }
    kernels::for_each_index(count, parallel, [&](int64_t i) {
      int64_t oa = 0, ob = 0, rest = i;
      for (size_t axis = batch.size(); axis-- > 0;) {
        const int64_t idx = rest % batch[axis];
        rest /= batch[axis];
        oa += idx * a_strides[axis];
        ob += idx * b_strides[axis];
      }
      kernels::gemm<T>(m, n, k, {ap + oa * m * k, trans_a ? m : k, trans_a},
                       {bp + ob * k * n, trans_b ? k : n, trans_b}, op + i * m * n, n,
                       /*accumulate=*/false, bias_p, false);
    });
  });
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_same_dtype("matmul", a.dtype(), b.dtype());
  if (a.rank() < 2 || b.rank() < 2) {
    throw ShapeError("matmul: both operands need rank >= 2: " + to_string(a.shape()) + " @ " +
                     to_string(b.shape()));
  }
  const int64_t k = a.size(-1);
  if (k != b.size(-2)) {
    throw ShapeError("matmul: inner dimensions differ: " + to_string(a.shape()) + " @ " +
                     to_string(b.shape()));
  }
  if (b.rank() == 2) {
    // A weight: fold a's leading axes into rows, one GEMM for all of them.
    const Tensor rows = reshape(a.detach(), {leading_rows(a), k});  // [M', K]
    Shape out_shape = a.shape();
    out_shape.back() = b.size(-1);
    Tensor out = reshape(batched_product(rows, false, b.detach(), false), out_shape);
    return record<"matmul">(out, {a, b}, [rows, a, b](const Tensor& g) {
      const Tensor g_rows = reshape(g, {rows.size(0), b.size(-1)});  // [M', N]
      return std::vector<Tensor>{
          a.requires_grad() ? reshape(batched_product(g_rows, false, b, true), a.shape())
                            : Tensor(),
          b.requires_grad() ? batched_product(rows, true, g_rows, false) : Tensor()};
    });
  }
  Tensor out = batched_product(a, false, b, false);
  return record<"matmul">(out, {a, b}, [a, b](const Tensor& g) {
    // Gradients come out in the broadcast batch shape; the engine sums them back.
    return std::vector<Tensor>{a.requires_grad() ? batched_product(g, false, b, true) : Tensor(),
                               b.requires_grad() ? batched_product(a, true, g, false) : Tensor()};
  });
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_same_dtype("linear", x.dtype(), weight.dtype());
  if (bias.defined()) check_same_dtype("linear", x.dtype(), bias.dtype());
  if (weight.rank() != 2 || x.rank() < 1 || x.size(-1) != weight.size(1)) {
    throw ShapeError("linear: input " + to_string(x.shape()) + " (..., in) does not match weight " +
                     to_string(weight.shape()) + " (out, in)");
  }
  const int64_t in = weight.size(1), out_features = weight.size(0);
  if (bias.defined() && bias.shape() != Shape{out_features}) {
    throw ShapeError("linear: bias " + to_string(bias.shape()) + " does not match weight " +
                     to_string(weight.shape()) + " (expected [" + std::to_string(out_features) +
                     "])");
  }
  const Tensor rows = reshape(x.detach(), {leading_rows(x), in});  // [M, in]
  const Tensor y = batched_product(rows, false, weight.detach(), true,
                                   bias.defined() ? &bias : nullptr);  // [M, out]
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  return record<"linear">(
      reshape(y, out_shape), {x, weight, bias},
      [rows, x, weight, bias, out_features](const Tensor& g) {
        const Tensor g_rows = reshape(g, {rows.size(0), out_features});  // [M, out]
        return std::vector<Tensor>{
            x.requires_grad() ? reshape(batched_product(g_rows, false, weight, false), x.shape())
                              : Tensor(),
            weight.requires_grad() ? batched_product(g_rows, true, rows, false) : Tensor(),
            bias.defined() && bias.requires_grad() ? sum(g_rows, {0}) : Tensor()};
      });
}

}  // namespace gradlab
