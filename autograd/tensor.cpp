// Tensor factories, data access and printing.
#include "autograd/tensor.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>

#include "autograd/error.h"

namespace gradlab {
namespace {

void check_sizes(const Shape& shape) {
  for (int64_t d : shape) {
    if (d < 0) throw ShapeError("tensor: negative size in shape " + to_string(shape));
  }
}

std::shared_ptr<detail::Node> make_node(const Shape& shape, DType dtype,
                                        std::shared_ptr<Storage> storage) {
  auto node = std::make_shared<detail::Node>();
  node->shape = shape;
  node->dtype = dtype;
  node->storage = std::move(storage);
  return node;
}

template <class T, class F>
void fill_with(Tensor& t, F&& value_at) {
  T* p = t.mutable_data<T>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(value_at(i));
}

Tensor from_values(const Shape& shape, DType dtype, const auto& value_at) {
  Tensor t = Tensor::empty(shape, dtype);
  dispatch(dtype, [&]<class T>() { fill_with<T>(t, value_at); });
  return t;
}

}  // namespace

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  check_sizes(shape);
  const size_t bytes = static_cast<size_t>(gradlab::numel(shape)) * dtype_size(dtype);
  return Tensor(make_node(shape, dtype, std::make_shared<Storage>(bytes)));
}

Tensor Tensor::from_storage(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype) {
  check_sizes(shape);
  const size_t bytes = static_cast<size_t>(gradlab::numel(shape)) * dtype_size(dtype);
  if (storage->bytes() < bytes) {
    throw ShapeError("from_storage: " + std::to_string(storage->bytes()) +
                     " bytes of storage do not hold shape " + to_string(shape) + " of " +
                     dtype_name(dtype));
  }
  return Tensor(make_node(shape, dtype, std::move(storage)));
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.node_->storage->data(), 0, t.node_->storage->bytes());
  return t;
}

Tensor Tensor::ones(const Shape& shape, DType dtype) {
  return full(shape, 1.0, dtype);
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype) {
  return from_values(shape, dtype, [value](int64_t) { return value; });
}

Tensor Tensor::scalar(double value, DType dtype) {
  return full({}, value, dtype);
}

Tensor Tensor::arange(int64_t n, DType dtype) {
  return from_values({n}, dtype, [](int64_t i) { return static_cast<double>(i); });
}

Tensor Tensor::from_vector(const std::vector<double>& values, const Shape& shape, DType dtype) {
  if (static_cast<int64_t>(values.size()) != gradlab::numel(shape)) {
    throw ShapeError("from_vector: " + std::to_string(values.size()) +
                     " values do not fill shape " + to_string(shape));
  }
  return from_values(shape, dtype, [&](int64_t i) { return values[i]; });
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != gradlab::numel(shape)) {
    throw ShapeError("from_vector: " + std::to_string(values.size()) +
                     " values do not fill shape " + to_string(shape));
  }
  Tensor t = empty(shape, DType::Float32);
  std::copy(values.begin(), values.end(), t.mutable_data<float>());
  return t;
}

Tensor Tensor::randn(const Shape& shape, Generator& gen, DType dtype, double mean, double stddev) {
  return from_values(shape, dtype, [&](int64_t) { return mean + stddev * gen.normal(); });
}

Tensor Tensor::uniform(const Shape& shape, Generator& gen, double low, double high, DType dtype) {
  return from_values(shape, dtype, [&](int64_t) { return low + (high - low) * gen.uniform(); });
}

const Shape& Tensor::shape() const {
  if (!node_) throw GraphError("tensor: use of an undefined tensor");
  return node_->shape;
}

int64_t Tensor::size(int64_t axis) const {
  return shape()[normalize_axis("size", axis, rank())];
}
int64_t Tensor::numel() const {
  return gradlab::numel(shape());
}
DType Tensor::dtype() const {
  shape();
  return node_->dtype;
}

void Tensor::check_dtype(const char* accessor, DType requested) const {
  if (dtype() != requested) {
    throw DTypeError(std::string(accessor) + ": tensor is " + dtype_name(dtype()) + ", requested " +
                     dtype_name(requested));
  }
}

double Tensor::item() const {
  if (numel() != 1) {
    throw ShapeError("item: tensor of shape " + to_string(shape()) + " has " +
                     std::to_string(numel()) + " elements, not 1");
  }
  return dispatch(dtype(), [&]<class T>() { return static_cast<double>(data<T>()[0]); });
}

double Tensor::at(std::initializer_list<int64_t> index) const {
  if (static_cast<int64_t>(index.size()) != rank()) {
    throw ShapeError("at: index of rank " + std::to_string(index.size()) + " for tensor of shape " +
                     to_string(shape()));
  }
  const Shape strides = contiguous_strides(shape());
  int64_t offset = 0;
  int64_t axis = 0;
  for (int64_t i : index) {
    if (i < 0 || i >= shape()[axis]) {
      throw ShapeError("at: index " + std::to_string(i) + " out of range on axis " +
                       std::to_string(axis) + " of shape " + to_string(shape()));
    }
    offset += i * strides[axis++];
  }
  return dispatch(dtype(), [&]<class T>() { return static_cast<double>(data<T>()[offset]); });
}

std::vector<double> Tensor::to_vector() const {
  return dispatch(dtype(), [&]<class T>() {
    const T* p = data<T>();
    return std::vector<double>(p, p + numel());
  });
}

Tensor Tensor::clone() const {
  return to(dtype());
}

Tensor Tensor::to(DType target) const {
  Tensor out = empty(shape(), target);
  dispatch(dtype(), [&]<class S>() {
    dispatch(target,
             [&]<class T>() { std::copy(data<S>(), data<S>() + numel(), out.mutable_data<T>()); });
  });
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  if (src.shape() != shape()) {
    throw ShapeError("copy_from: source shape " + to_string(src.shape()) +
                     " differs from destination shape " + to_string(shape()));
  }
  check_same_dtype("copy_from", dtype(), src.dtype());
  node_->storage->mark_written();
  std::memcpy(node_->storage->data(), src.node_->storage->data(),
              static_cast<size_t>(numel()) * dtype_size(dtype()));
}

void Tensor::set_data(const Tensor& src) {
  if (!is_leaf()) throw GraphError(std::string("set_data: only leaf tensors can be replaced"));
  node_->shape = src.shape();
  node_->dtype = src.dtype();
  node_->storage = src.node_->storage;
  node_->grad = Tensor();
}

uint64_t Tensor::version() const {
  return node_->storage->version();
}

bool Tensor::requires_grad() const {
  return node_ && node_->requires_grad;
}

Tensor& Tensor::set_requires_grad(bool requires_grad) {
  if (!is_leaf()) {
    throw GraphError(std::string("set_requires_grad: only leaf tensors can be marked; this one ") +
                     "comes from " + op_name() + " (use detach() first)");
  }
  node_->requires_grad = requires_grad;
  return *this;
}

bool Tensor::is_leaf() const {
  return node_ && node_->op == nullptr;
}
Tensor Tensor::grad() const {
  return node_ ? node_->grad : Tensor();
}
void Tensor::zero_grad() {
  node_->grad = Tensor();
}

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined() && (grad.shape() != shape() || grad.dtype() != dtype())) {
    throw ShapeError("set_grad: gradient " + to_string(grad.shape()) + " " +
                     dtype_name(grad.dtype()) + " does not match tensor " + to_string(shape()) +
                     " " + dtype_name(dtype()));
  }
  node_->grad = grad;
}

Tensor Tensor::detach() const {
  auto node = std::make_shared<detail::Node>();
  node->shape = shape();
  node->dtype = dtype();
  node->storage = node_->storage;
  return Tensor(std::move(node));
}

const char* Tensor::op_name() const {
  return node_ && node_->op ? node_->op : "leaf";
}

namespace {

template <class List>
void flatten_into(const List& list, std::vector<double>& values, Shape& shape, size_t depth) {
  if (shape.size() <= depth) shape.push_back(static_cast<int64_t>(list.size()));
  if (shape[depth] != static_cast<int64_t>(list.size())) {
    throw ShapeError("tensor: ragged nested list: expected " + std::to_string(shape[depth]) +
                     " items at depth " + std::to_string(depth) + ", got " +
                     std::to_string(list.size()));
  }
  for (const auto& item : list) {
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(item)>>) {
      values.push_back(item);
    } else {
      flatten_into(item, values, shape, depth + 1);
    }
  }
}

template <class List>
Tensor from_nested(const List& list, DType dtype) {
  std::vector<double> values;
  Shape shape;
  flatten_into(list, values, shape, 0);
  return Tensor::from_vector(values, shape, dtype);
}

}  // namespace

Tensor tensor(std::initializer_list<double> values, DType dtype) {
  return from_nested(values, dtype);
}
Tensor tensor(std::initializer_list<std::initializer_list<double>> values, DType dtype) {
  return from_nested(values, dtype);
}
Tensor tensor(std::initializer_list<std::initializer_list<std::initializer_list<double>>> values,
              DType dtype) {
  return from_nested(values, dtype);
}
Tensor tensor(std::initializer_list<
                  std::initializer_list<std::initializer_list<std::initializer_list<double>>>>
                  values,
              DType dtype) {
  return from_nested(values, dtype);
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  const std::vector<double> x = a.to_vector();
  const std::vector<double> y = b.to_vector();
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i]) || std::isnan(y[i])) return false;
    if (x[i] == y[i]) continue;  // equal infinities
    if (std::isinf(x[i]) || std::isinf(y[i])) return false;
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  }
  return true;
}

namespace {

constexpr int64_t kSummariseAbove = 1000;
constexpr int64_t kEdgeItems = 3;

void print_axis(std::ostream& out, const std::vector<double>& values, const Shape& shape,
                const Shape& strides, size_t axis, int64_t offset, bool summarise) {
  if (axis == shape.size()) {
    out << values[offset];
    return;
  }
  out << '[';
  const int64_t n = shape[axis];
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) out << ", ";
    if (summarise && n > 2 * kEdgeItems && i == kEdgeItems) {
      out << "..., ";
      i = n - kEdgeItems;
    }
    print_axis(out, values, shape, strides, axis + 1, offset + i * strides[axis], summarise);
  }
  out << ']';
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const Tensor& t) {
  if (!t.defined()) return out << "Tensor(undefined)";
  out << "Tensor(shape=" << to_string(t.shape()) << ", dtype=" << dtype_name(t.dtype())
      << ", values=";
  print_axis(out, t.to_vector(), t.shape(), contiguous_strides(t.shape()), 0, 0,
             t.numel() > kSummariseAbove);
  return out << ')';
}

}  // namespace gradlab
