// Tensors and numpy arrays: gradlab.Tensor exposes its values through the buffer protocol
// (np.asarray(t) shares them), arrays handed to Python share the tensor's storage and keep it
// alive, arrays of a shareable layout become tensors over their memory (gradlab.tensor), and
// token arrays of any integer type become Indices.
#include <algorithm>
#include <cstdint>
#include <optional>

#include "autograd/threads.h"
#include "python/src/bindings.h"

namespace gradlab::python {
namespace {

// The byte strides of a row-major array of T with this shape, as numpy reads them.
template <class T>
std::vector<py::ssize_t> row_major_strides(const Shape& shape) {
  std::vector<py::ssize_t> strides(shape.size());
  py::ssize_t stride = sizeof(T);
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= static_cast<py::ssize_t>(shape[i]);
  }
  return strides;
}

template <class T>
py::array typed_view(const Tensor& t) {
  const Shape& shape = t.shape();
  const std::vector<py::ssize_t> strides = row_major_strides<T>(shape);
  // The capsule owns a handle to the tensor: its storage lives while the array does.
  auto* owner = new Tensor(t);
  py::capsule base(owner, [](void* p) { delete static_cast<Tensor*>(p); });
  T* data = owner->mutable_data<T>();
  return py::array_t<T>(std::vector<py::ssize_t>(shape.begin(), shape.end()), strides, data, base);
}

// Why a tensor cannot share the memory of this float32 or float64 array, or nothing if it can.
// The alignment is every storage's (the lane attention kernel dereferences whole vectors of
// buffers it is given), so a shared tensor is one no kernel can tell from another.
std::optional<std::string> why_not_shared(const py::array& array) {
  if (!(array.flags() & py::array::c_style)) return "it is not C-contiguous";
  if (!array.writeable()) return "it is read-only";
  const auto past = reinterpret_cast<std::uintptr_t>(array.data()) % Storage::kAlignment;
  if (past != 0) {
    return "its data is " + std::to_string(past) + " bytes past a " +
           std::to_string(Storage::kAlignment) + "-byte boundary";
  }
  return std::nullopt;
}

// A tensor over the array's memory. Its storage's owner holds a reference to the array (and so
// to whatever owns the memory); the last tensor handle may go on a thread without the GIL,
// which dropping a Python reference needs.
Tensor shared_tensor(py::array array, const Shape& shape, DType dtype) {
  auto* reference = new py::object(array);
  std::shared_ptr<void> owner(reference, [](void* p) {
    auto* object = static_cast<py::object*>(p);
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      delete object;
    } else {
      object->release();  // the interpreter, and the array with it, is gone
      delete object;
    }
  });
  auto storage = std::make_shared<Storage>(array.mutable_data(),
                                           static_cast<size_t>(array.nbytes()), std::move(owner));
  return Tensor::from_storage(std::move(storage), shape, dtype);
}

}  // namespace

py::array to_numpy(const Tensor& t) {
  return dispatch(t.dtype(), [&]<class T>() { return typed_view<T>(t); });
}

Tensor from_numpy(const py::handle& object, const std::string& what, ArrayCopy copy) {
  const py::array array = py::array::ensure(object);
  if (!array) throw py::type_error(what + ": expected an array of float32 or float64");
  const Shape shape(array.shape(), array.shape() + array.ndim());
  const auto convert = [&]<class T>(DType dtype) {
    if (copy != ArrayCopy::Always) {
      std::optional<std::string> reason = why_not_shared(array);
      if (!py::isinstance<py::array>(object)) {
        reason = "it is a " + std::string(py::str(object.get_type().attr("__name__"))) +
                 ", not a numpy array";
      }
      if (!reason) return shared_tensor(array, shape, dtype);
      if (copy == ArrayCopy::Never) {
        throw py::value_error(what +
                              ": copy=False, but the array's memory cannot be shared: " + *reason);
      }
    }
    const auto contiguous = py::array_t<T, py::array::c_style>::ensure(array);
    Tensor t = Tensor::empty(shape, dtype);
    std::copy_n(contiguous.data(), t.numel(), t.template mutable_data<T>());
    return t;
  };
  if (py::isinstance<py::array_t<float>>(array)) return convert.operator()<float>(DType::Float32);
  if (py::isinstance<py::array_t<double>>(array)) return convert.operator()<double>(DType::Float64);
  throw py::type_error(what + ": expected float32 or float64 values, got " +
                       std::string(py::str(array.dtype())));
}

Indices to_tokens(const py::handle& object, int64_t vocab_size, const std::string& what) {
  const py::array array = py::array::ensure(object);
  if (!array || (array.dtype().kind() != 'i' && array.dtype().kind() != 'u')) {
    const std::string got = array ? std::string(py::str(array.dtype())) : "no array";
    throw py::type_error(what + ": expected integer token ids, got " + got);
  }
  if (array.ndim() != 1 && array.ndim() != 2) {
    throw py::value_error(what + ": expected token ids of shape [B, T] or [T], got rank " +
                          std::to_string(array.ndim()));
  }
  const auto ids = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(array);
  Shape shape(ids.shape(), ids.shape() + ids.ndim());
  if (shape.size() == 1) shape.insert(shape.begin(), 1);
  if (numel(shape) == 0) {
    throw py::value_error(what + ": empty batch of token ids " + to_string(shape));
  }
  std::vector<int64_t> values(ids.data(), ids.data() + ids.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 0 || values[i] >= vocab_size) {
      throw py::index_error(what + ": token id " + std::to_string(values[i]) + " at position " +
                            std::to_string(i) + " is outside the vocabulary [0, " +
                            std::to_string(vocab_size) + ")");
    }
  }
  return Indices(shape, std::move(values));
}

py::array_t<int64_t> indices_to_numpy(const Indices& indices) {
  py::array_t<int64_t> array(std::vector<py::ssize_t>(indices.shape.begin(), indices.shape.end()));
  std::copy(indices.values.begin(), indices.values.end(), array.mutable_data());
  return array;
}

void bind_arrays(py::module_& m) {
  py::class_<Tensor>(m, "Tensor", py::buffer_protocol(),
                     "A gradlab tensor; np.asarray(t) shares its values")
      .def_buffer([](Tensor& t) {
        return dispatch(t.dtype(), [&]<class T>() {
          const Shape& shape = t.shape();
          const std::vector<py::ssize_t> strides = row_major_strides<T>(shape);
          return py::buffer_info(t.mutable_data<T>(), sizeof(T), py::format_descriptor<T>::format(),
                                 static_cast<py::ssize_t>(shape.size()),
                                 std::vector<py::ssize_t>(shape.begin(), shape.end()), strides);
        });
      })
      .def_property_readonly(
          "shape",
          [](const Tensor& t) { return py::tuple(py::cast(std::vector<int64_t>(t.shape()))); })
      .def_property_readonly("dtype", [](const Tensor& t) { return dtype_name(t.dtype()); })
      .def("numpy", &to_numpy, "the values as a numpy array sharing them")
      .def("__repr__", [](const Tensor& t) {
        return "gradlab.Tensor(shape=" + to_string(t.shape()) + ", dtype=" + dtype_name(t.dtype()) +
               ")";
      });
  m.def(
      "tensor",
      [](const py::handle& array, std::optional<bool> copy) {
        const ArrayCopy mode = !copy   ? ArrayCopy::IfNeeded
                               : *copy ? ArrayCopy::Always
                                       : ArrayCopy::Never;
        return from_numpy(array, "tensor", mode);
      },
      py::arg("array"), py::arg("copy") = py::none(),
      "a Tensor of a float32 or float64 array's values, sharing its memory when its layout "
      "allows (C-contiguous, writable, 64-byte aligned); copy=True always copies, copy=False "
      "raises ValueError instead of copying");
  m.def(
      "set_num_threads",
      [](int n) {
        if (n < 1)
          throw py::value_error("set_num_threads: expected at least 1 thread, got " +
                                std::to_string(n));
        set_threads(n);
      },
      py::arg("n"), "the threads gradlab's ops run on from now on");
  m.def("get_num_threads", &threads);
}

}  // namespace gradlab::python
