// Reading the HDF5 files gradlab's commands write (attention weights, activations) in tests.
#pragma once

#include <H5Cpp.h>

#include <string>
#include <vector>

namespace gradlab::testing {

// One float32 dataset's values, and its shape in dims.
inline std::vector<float> read_floats(const H5::H5File& file, const std::string& name,
                                      std::vector<hsize_t>& dims) {
  const H5::DataSet set = file.openDataSet(name);
  const H5::DataSpace space = set.getSpace();
  dims.assign(static_cast<size_t>(space.getSimpleExtentNdims()), 0);
  space.getSimpleExtentDims(dims.data());
  std::vector<float> values(static_cast<size_t>(space.getSimpleExtentNpoints()));
  set.read(values.data(), H5::PredType::NATIVE_FLOAT);
  return values;
}

}  // namespace gradlab::testing
