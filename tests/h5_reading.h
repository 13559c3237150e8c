// Reading the HDF5 files gradlab's commands write (attention weights, activations, patching
// results) in tests.
#pragma once

#include <H5Cpp.h>

#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace gradlab::testing {

// One numeric dataset's values (float, double or int64_t), and its shape in dims.
template <class T>
std::vector<T> read_values(const H5::H5File& file, const std::string& name,
                           std::vector<hsize_t>& dims) {
  const H5::DataSet set = file.openDataSet(name);
  const H5::DataSpace space = set.getSpace();
  dims.assign(static_cast<size_t>(space.getSimpleExtentNdims()), 0);
  space.getSimpleExtentDims(dims.data());
  std::vector<T> values(static_cast<size_t>(space.getSimpleExtentNpoints()));
  const H5::PredType& type = std::is_same_v<T, float>    ? H5::PredType::NATIVE_FLOAT
                             : std::is_same_v<T, double> ? H5::PredType::NATIVE_DOUBLE
                                                         : H5::PredType::NATIVE_INT64;
  set.read(values.data(), type);
  return values;
}

inline std::vector<float> read_floats(const H5::H5File& file, const std::string& name,
                                      std::vector<hsize_t>& dims) {
  return read_values<float>(file, name, dims);
}

// A 1-D dataset of fixed-length strings.
inline std::vector<std::string> read_strings(const H5::H5File& file, const std::string& name) {
  const H5::DataSet set = file.openDataSet(name);
  const H5::StrType type = set.getStrType();
  const size_t width = type.getSize();
  hsize_t count = 0;
  set.getSpace().getSimpleExtentDims(&count);
  std::vector<char> packed(count * width);
  set.read(packed.data(), type);
  std::vector<std::string> values;
  for (hsize_t i = 0; i < count; ++i) {
    const char* begin = packed.data() + i * width;
    values.emplace_back(begin, strnlen(begin, width));
  }
  return values;
}

}  // namespace gradlab::testing
