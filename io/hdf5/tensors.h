// Reading the tensors of a checkpoint file that may be damaged or hostile: every dataset's type,
// shape and storage is checked against the file before a byte is allocated for its values, and
// the values are read afterwards, each checked against its Fletcher-32 checksum. Internal to the
// checkpoint code (not installed).
#pragma once

#include <H5Cpp.h>

#include <string>
#include <vector>

#include "io/hdf5/file.h"
#include "nn/module.h"

namespace gradlab::io::hdf5 {

// A tensor dataset whose type, shape and storage are checked and whose values are not read yet.
struct StoredTensor {
  std::string name;  // as in CheckpointData: "<parameter>" or "<parameter>/<slot>"
  std::string item;  // "/model/<parameter>" or "/optimizer/<parameter>/<slot>"
  H5::DataSet dataset;
  DType dtype;
  Shape shape;
};

// The dataset `link` of group, checked (item names it in messages; name is StoredTensor::name).
StoredTensor open_tensor(const Source& source, const std::string& name, const std::string& item,
                         const H5::Group& group, const std::string& link);

// The values of tensors opened by open_tensor, in the file's dtype and shape.
std::vector<nn::NamedTensor> read_values(const std::string& path,
                                         const std::vector<StoredTensor>& stored);

}  // namespace gradlab::io::hdf5
