// Tensor: a cheap, shared handle to an N-d row-major array of float32 or float64 plus the
// autograd bookkeeping (requires_grad, the accumulated gradient, and, for results of ops, the
// inputs and backward closure). Copying a Tensor copies the handle, not the data.
//
// Ops are free functions in the family headers (elementwise.h, reduce.h, matmul.h, ...);
// include "autograd/ops.h" for all of them.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <vector>

#include "autograd/dtype.h"
#include "autograd/random.h"
#include "autograd/shape.h"
#include "autograd/storage.h"

namespace gradlab {

namespace detail {
struct Node;
}

class Tensor {
 public:
  // An undefined tensor (defined() is false): the "no tensor" value, e.g. an absent bias.
  Tensor() = default;

  // --- Factories -------------------------------------------------------------------------
  // Uninitialised contents; for op outputs that are fully overwritten.
  static Tensor empty(const Shape& shape, DType dtype = DType::Float32);
  static Tensor zeros(const Shape& shape, DType dtype = DType::Float32);
  static Tensor ones(const Shape& shape, DType dtype = DType::Float32);
  static Tensor full(const Shape& shape, double value, DType dtype = DType::Float32);
  static Tensor scalar(double value, DType dtype = DType::Float32);
  // 0, 1, ..., n-1 as a 1-D tensor.
  static Tensor arange(int64_t n, DType dtype = DType::Float32);
  // Copies values (row-major); throws ShapeError if their count differs from numel(shape).
  static Tensor from_vector(const std::vector<double>& values, const Shape& shape,
                            DType dtype = DType::Float32);
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  // Seeded draws: values depend only on the generator's state.
  static Tensor randn(const Shape& shape, Generator& gen, DType dtype = DType::Float32,
                      double mean = 0.0, double stddev = 1.0);
  static Tensor uniform(const Shape& shape, Generator& gen, double low, double high,
                        DType dtype = DType::Float32);
  // A leaf over an existing storage (one wrapping a foreign buffer, say): no copy; writes
  // through either side are seen by the other. Throws ShapeError if the storage holds fewer
  // bytes than shape's elements of dtype need.
  static Tensor from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype);

  // --- Shape and data --------------------------------------------------------------------
  bool defined() const { return node_ != nullptr; }
  const Shape& shape() const;
  int64_t rank() const { return static_cast<int64_t>(shape().size()); }
  // Size of one axis; negative axes count from the end.
  int64_t size(int64_t axis) const;
  int64_t numel() const;
  DType dtype() const;

  // Raw row-major data; both throw DTypeError if T does not match dtype().
  // data<T>() reads: it never changes version(), on a const or a non-const tensor alike.
  template <class T>
  const T* data() const;
  // mutable_data<T>() is the only way to write the values in place, and it changes version()
  // when it hands out the pointer: take a fresh one for writes that follow a use of the values
  // (a cache rebuilt in between would otherwise miss them).
  template <class T>
  T* mutable_data();
  // Tracks in-place writes: it changes whenever the values may have changed (a mutable_data<T>()
  // pointer was handed out, copy_from, set_data), never on a read, and never repeats, even
  // across tensors. A value derived from this tensor and kept with its version (a module's
  // cache of stacked parameters) is still valid while it is the same. Handles sharing storage
  // (detach, reshape) share the version.
  uint64_t version() const;

  // The single value of a one-element tensor, as double.
  double item() const;
  // Element at a full index, as double (for tests and printing; not for hot loops).
  double at(std::initializer_list<int64_t> index) const;
  std::vector<double> to_vector() const;

  // A copy with its own storage and no graph.
  Tensor clone() const;
  // A copy converted to dtype (no graph); a tensor already of that dtype is cloned.
  Tensor to(DType dtype) const;
  // Overwrites this tensor's values with src's (same shape and dtype), keeping its identity:
  // parameters stay the same objects an optimizer refers to.
  void copy_from(const Tensor& src);
  // Makes this leaf take src's shape, dtype and values (sharing src's storage) and drops its
  // gradient. Every handle to this tensor (a module's member, an optimizer's list) sees the
  // change: this is how a module moves to float64.
  void set_data(const Tensor& src);

  // --- Autograd ---------------------------------------------------------------------------
  bool requires_grad() const;
  // Marks a leaf as a parameter/input whose gradient backward() should accumulate.
  Tensor& set_requires_grad(bool requires_grad = true);
  // True for tensors not produced by a recorded op.
  bool is_leaf() const;
  // The accumulated gradient of a leaf (undefined before the first backward).
  Tensor grad() const;
  void zero_grad();
  // Replaces a leaf's gradient (used by gradient clipping and checkpoint loading).
  void set_grad(const Tensor& grad);

  // Backpropagates from a one-element tensor (seed gradient 1).
  void backward(bool retain_graph = false) const;
  // Backpropagates an explicit gradient of this tensor's shape and dtype.
  void backward(const Tensor& grad_output, bool retain_graph = false) const;

  // Same storage, no graph, requires_grad false.
  Tensor detach() const;
  // Name of the op that produced this tensor, or "leaf".
  const char* op_name() const;

  // Identity comparison (same underlying tensor), not value comparison.
  bool same(const Tensor& other) const { return node_ == other.node_; }

  const std::shared_ptr<detail::Node>& node() const { return node_; }
  explicit Tensor(std::shared_ptr<detail::Node> node) : node_(std::move(node)) {}

 private:
  void check_dtype(const char* accessor, DType requested) const;
  std::shared_ptr<detail::Node> node_;
};

// Nested initializer lists for tests: tensor({{1, 2}, {3, 4}}) has shape [2, 2].
Tensor tensor(std::initializer_list<double> values, DType dtype = DType::Float32);
Tensor tensor(std::initializer_list<std::initializer_list<double>> values,
              DType dtype = DType::Float32);
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<double>>> values,
              DType dtype = DType::Float32);
Tensor tensor(std::initializer_list<
                  std::initializer_list<std::initializer_list<std::initializer_list<double>>>>
                  values,
              DType dtype = DType::Float32);

// |a - b| <= atol + rtol * |b| everywhere; false if shapes differ. Compares across dtypes.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);

// Shape, dtype and values; large tensors show their first and last three items per axis.
std::ostream& operator<<(std::ostream& out, const Tensor& t);

namespace detail {

// Backward closures map the output gradient to one gradient per input (undefined where an
// input needs none). A returned gradient may have the broadcast shape of the output; the engine
// reduces it to the input's shape.
using BackwardFn = std::function<std::vector<Tensor>(const Tensor& grad_output)>;

struct Node {
  Shape shape;
  DType dtype = DType::Float32;
  std::shared_ptr<Storage> storage;

  bool requires_grad = false;
  Tensor grad;          // accumulated gradient of a leaf
  Tensor pending_grad;  // gradient gathered during one backward pass

  // Graph: empty for leaves and for everything created under NoGradGuard.
  const char* op = nullptr;
  std::vector<std::shared_ptr<Node>> inputs;
  BackwardFn backward;
  bool graph_freed = false;

  Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Releases long chains iteratively so that dropping a 100k-node graph cannot overflow the
  // stack through nested destructors.
  ~Node();
};

}  // namespace detail

template <class T>
const T* Tensor::data() const {
  check_dtype("data", dtype_of<T>());
  return static_cast<const T*>(node_->storage->data());
}

template <class T>
T* Tensor::mutable_data() {
  check_dtype("mutable_data", dtype_of<T>());
  node_->storage->mark_written();
  return static_cast<T*>(node_->storage->data());
}

}  // namespace gradlab
