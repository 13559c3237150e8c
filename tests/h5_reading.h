// Reading the HDF5 files gradlab's commands write (attention weights, activations, head scores)
// in tests.
#pragma once

#include <H5Cpp.h>

#include <string>
#include <vector>

namespace gradlab::testing {

// One dataset's values as T (HDF5 converts them), and its shape in dims.
template <class T>
std::vector<T> read_values(const H5::H5File& file, const std::string& name,
                           std::vector<hsize_t>& dims, const H5::PredType& type) {
  const H5::DataSet set = file.openDataSet(name);
  const H5::DataSpace space = set.getSpace();
  dims.assign(static_cast<size_t>(space.getSimpleExtentNdims()), 0);
  space.getSimpleExtentDims(dims.data());
  std::vector<T> values(static_cast<size_t>(space.getSimpleExtentNpoints()));
  set.read(values.data(), type);
  return values;
}

// A float32 dataset (attention weights, activations).
inline std::vector<float> read_floats(const H5::H5File& file, const std::string& name,
                                      std::vector<hsize_t>& dims) {
  return read_values<float>(file, name, dims, H5::PredType::NATIVE_FLOAT);
}

// A float64 dataset (head scores).
inline std::vector<double> read_doubles(const H5::H5File& file, const std::string& name,
                                        std::vector<hsize_t>& dims) {
  return read_values<double>(file, name, dims, H5::PredType::NATIVE_DOUBLE);
}

}  // namespace gradlab::testing
