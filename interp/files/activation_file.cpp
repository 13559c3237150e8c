// Writing a cache of hook point activations (and their gradients) to HDF5.
#include "interp/files/activation_file.h"

#include <algorithm>

#include "interp/files/hdf5/datasets.h"

namespace gradlab::interp {
namespace {

// One point's dataset: value [1, ...] (or [T, C] for a point of every sequence) without its
// batch axis, labelled with its letters.
void write_point(H5::H5File& file, const std::string& name, const Tensor& activation,
                 std::string letters) {
  const Tensor value = activation.to(DType::Float32);
  // Points of every sequence ([B, T, C]) lose their batch axis of 1; positions ([T, C]) have
  // none.
  const bool batched = letters.rfind("[B, ", 0) == 0;
  if (batched) letters.erase(1, 3);  // "[B, T, C]" -> "[T, C]"
  std::vector<hsize_t> dims;
  for (int64_t axis = batched ? 1 : 0; axis < value.rank(); ++axis) {
    dims.push_back(static_cast<hsize_t>(value.size(axis)));
  }
  H5::DataSet set = file.createDataSet(name, H5::PredType::NATIVE_FLOAT,
                                       H5::DataSpace(static_cast<int>(dims.size()), dims.data()));
  set.write(value.data<float>(), H5::PredType::NATIVE_FLOAT);
  const H5::StrType type(H5::PredType::C_S1, std::max<size_t>(1, letters.size()));
  set.createAttribute("letters", type, H5::DataSpace()).write(type, letters);
}

}  // namespace

void write_activation_file(const std::string& path, const nn::SequenceBatch& batch,
                           const std::vector<int64_t>& answer, const nn::ActivationCache& cache,
                           const std::vector<nn::HookPointInfo>& points) {
  hdf5::write_file(path, "activations", [&](H5::H5File& file) {
    hdf5::write_tokens(file, batch, answer);
    for (const std::string& name : cache.names()) {
      const std::string point = name.ends_with("_grad") ? name.substr(0, name.size() - 5) : name;
      std::string letters;
      for (const nn::HookPointInfo& info : points) {
        if (info.name == point) letters = info.letters;
      }
      write_point(file, name, cache.at(name), letters);
    }
  });
}

}  // namespace gradlab::interp
