// Reading the HDF5 files gradlab's commands write (attention weights, activations, the logit
// lens) in tests.
#pragma once

#include <H5Cpp.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gradlab::testing {

// One dataset's values read as `type` (a native type matching T), and its shape in dims.
template <typename T>
std::vector<T> read_dataset(const H5::H5File& file, const std::string& name,
                            std::vector<hsize_t>& dims, const H5::PredType& type) {
  const H5::DataSet set = file.openDataSet(name);
  const H5::DataSpace space = set.getSpace();
  dims.assign(static_cast<size_t>(space.getSimpleExtentNdims()), 0);
  space.getSimpleExtentDims(dims.data());
  std::vector<T> values(static_cast<size_t>(space.getSimpleExtentNpoints()));
  set.read(values.data(), type);
  return values;
}

inline std::vector<float> read_floats(const H5::H5File& file, const std::string& name,
                                      std::vector<hsize_t>& dims) {
  return read_dataset<float>(file, name, dims, H5::PredType::NATIVE_FLOAT);
}

inline std::vector<int64_t> read_ints(const H5::H5File& file, const std::string& name,
                                      std::vector<hsize_t>& dims) {
  return read_dataset<int64_t>(file, name, dims, H5::PredType::NATIVE_INT64);
}

}  // namespace gradlab::testing
