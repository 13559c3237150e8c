// Shape ops and their gradients: each backward is the inverse reorganisation.
#include "autograd/shape_ops.h"

#include <cstring>
#include <numeric>

#include "autograd/graph.h"

namespace gradlab {
namespace {

// Rows of `outer` blocks: a tensor viewed as [outer, size(axis) * inner] around axis.
struct Blocks {
  int64_t outer = 1, inner = 1;
  Blocks(const Shape& shape, int64_t axis) {
    for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
    for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  }
};

// Copies, for each of `outer` blocks, `count` bytes from src (block pitch src_pitch, starting
// at src_offset) to dst (pitch dst_pitch, starting at dst_offset). Everything is in bytes.
void copy_blocks(const void* src, int64_t src_pitch, int64_t src_offset, void* dst,
                 int64_t dst_pitch, int64_t dst_offset, int64_t outer, int64_t count) {
  const auto* s = static_cast<const char*>(src);
  auto* d = static_cast<char*>(dst);
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(d + o * dst_pitch + dst_offset, s + o * src_pitch + src_offset, count);
  }
}

void* raw(const Tensor& t) {
  return t.node()->storage->data();
}

}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape target = shape;
  int64_t known = 1;
  int64_t inferred = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1 && inferred < 0) {
      inferred = static_cast<int64_t>(i);
    } else if (target[i] < 0) {
      throw ShapeError("reshape: invalid target shape " + to_string(shape) +
                       " (at most one -1, no other negative sizes)");
    } else {
      known *= target[i];
    }
  }
  if (inferred >= 0 && known != 0 && x.numel() % known == 0) target[inferred] = x.numel() / known;
  if (numel(target) != x.numel() || (inferred >= 0 && target[inferred] < 0)) {
    throw ShapeError("reshape: cannot reshape " + to_string(x.shape()) + " (" +
                     std::to_string(x.numel()) + " elements) into " + to_string(shape));
  }
  auto node = std::make_shared<detail::Node>();
  node->shape = target;
  node->dtype = x.dtype();
  node->storage = x.node()->storage;
  return record<"reshape">(Tensor(std::move(node)), {x}, [x_shape = x.shape()](const Tensor& g) {
    return std::vector<Tensor>{reshape(g, x_shape)};
  });
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  const int64_t rank = x.rank();
  std::vector<int64_t> axes(dims.size());
  std::vector<bool> seen(rank, false);
  bool valid = static_cast<int64_t>(dims.size()) == rank;
  for (size_t i = 0; valid && i < dims.size(); ++i) {
    if (dims[i] < -rank || dims[i] >= rank) {
      valid = false;
      break;
    }
    axes[i] = dims[i] < 0 ? dims[i] + rank : dims[i];
    valid = !seen[axes[i]];
    seen[axes[i]] = true;
  }
  if (!valid) {
    throw AxisError("permute: " + to_string(dims) + " is not a permutation of the axes of " +
                    to_string(x.shape()));
  }
  Shape out_shape(rank);
  const Shape in_strides = contiguous_strides(x.shape());
  Shape strides(rank);  // input stride of each output axis
  for (int64_t i = 0; i < rank; ++i) {
    out_shape[i] = x.shape()[axes[i]];
    strides[i] = in_strides[axes[i]];
  }
  Tensor out = Tensor::empty(out_shape, x.dtype());
  const int64_t n = x.numel();
  if (n > 0) {
    dispatch(x.dtype(), [&]<class T>() {
      const T* in = x.data<T>();
      T* o = out.mutable_data<T>();
      if (rank == 0) {
        o[0] = in[0];
        return;
      }
      const int64_t inner = out_shape[rank - 1];
      const int64_t inner_stride = strides[rank - 1];
      for (int64_t row = 0; row < n / inner; ++row) {
        int64_t offset = 0, rest = row;
        for (int64_t axis = rank - 1; axis-- > 0;) {
          offset += (rest % out_shape[axis]) * strides[axis];
          rest /= out_shape[axis];
        }
        T* dst = o + row * inner;
        for (int64_t j = 0; j < inner; ++j) dst[j] = in[offset + j * inner_stride];
      }
    });
  }
  std::vector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i) inverse[axes[i]] = i;
  return record<"permute">(
      out, {x}, [inverse](const Tensor& g) { return std::vector<Tensor>{permute(g, inverse)}; });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  const int64_t a = normalize_axis("transpose", dim0, x.rank());
  const int64_t b = normalize_axis("transpose", dim1, x.rank());
  std::vector<int64_t> dims(x.rank());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[a], dims[b]);
  return permute(x, dims);
}

Tensor concat(const std::vector<Tensor>& tensors, int64_t axis) {
  if (tensors.empty()) throw ShapeError("concat: no tensors to join");
  const Tensor& first = tensors.front();
  const int64_t a = normalize_axis("concat", axis, first.rank());
  Shape out_shape = first.shape();
  out_shape[a] = 0;
  for (const Tensor& t : tensors) {
    check_same_dtype("concat", first.dtype(), t.dtype());
    Shape expected = first.shape();
    expected[a] = t.rank() == first.rank() ? t.shape()[a] : -1;
    if (t.shape() != expected) {
      throw ShapeError("concat: shapes differ outside axis " + std::to_string(axis) + ": " +
                       to_string(first.shape()) + " and " + to_string(t.shape()));
    }
    out_shape[a] += t.shape()[a];
  }
  Tensor out = Tensor::empty(out_shape, first.dtype());
  const Blocks blocks(out_shape, a);
  const int64_t item = static_cast<int64_t>(dtype_size(first.dtype()));
  const int64_t out_pitch = out_shape[a] * blocks.inner * item;
  int64_t offset = 0;
  std::vector<int64_t> starts;
  for (const Tensor& t : tensors) {
    const int64_t bytes = t.shape()[a] * blocks.inner * item;
    copy_blocks(raw(t), bytes, 0, raw(out), out_pitch, offset * blocks.inner * item, blocks.outer,
                bytes);
    starts.push_back(offset);
    offset += t.shape()[a];
  }
  return record<"concat">(out, tensors, [tensors, starts, a](const Tensor& g) {
    std::vector<Tensor> grads;
    for (size_t i = 0; i < tensors.size(); ++i) {
      grads.push_back(tensors[i].requires_grad() ? narrow(g, a, starts[i], tensors[i].shape()[a])
                                                 : Tensor());
    }
    return grads;
  });
}

Tensor narrow(const Tensor& x, int64_t axis, int64_t start, int64_t length) {
  const int64_t a = normalize_axis("narrow", axis, x.rank());
  const int64_t size = x.shape()[a];
  if (start < 0 || length < 0 || start + length > size) {
    throw ShapeError("narrow: range [" + std::to_string(start) + ", " +
                     std::to_string(start + length) + ") is outside axis " + std::to_string(axis) +
                     " of size " + std::to_string(size) + " in shape " + to_string(x.shape()));
  }
  Shape out_shape = x.shape();
  out_shape[a] = length;
  Tensor out = Tensor::empty(out_shape, x.dtype());
  const Blocks blocks(x.shape(), a);
  const int64_t item = static_cast<int64_t>(dtype_size(x.dtype()));
  const int64_t row = blocks.inner * item;
  copy_blocks(raw(x), size * row, start * row, raw(out), length * row, 0, blocks.outer,
              length * row);
  return record<"narrow">(out, {x}, [a, start, length, size, x_shape = x.shape()](const Tensor& g) {
    Tensor dx = Tensor::zeros(x_shape, g.dtype());
    const Blocks b(x_shape, a);
    const int64_t row_bytes = b.inner * static_cast<int64_t>(dtype_size(g.dtype()));
    copy_blocks(raw(g), length * row_bytes, 0, raw(dx), size * row_bytes, start * row_bytes,
                b.outer, length * row_bytes);
    return std::vector<Tensor>{dx};
  });
}

}  // namespace gradlab
