// The HDF5 pieces the instruments' files share.
#include "interp/files/hdf5/datasets.h"

#include <algorithm>

#include "autograd/error.h"
#include "io/atomic_file.h"

namespace gradlab::interp::hdf5 {

void write_file(const std::string& path, const std::string& contents,
                const std::function<void(H5::H5File& file)>& fill) {
  io::replace_file(path, [&](const std::string& temp) {
    try {
      H5::Exception::dontPrint();
      H5::H5File file(temp, H5F_ACC_TRUNC);
      fill(file);
    } catch (const H5::Exception& e) {
      throw FileError(path + ": cannot write " + contents + ": " + e.getDetailMsg());
    }
  });
}

void write_ints(H5::H5Location& where, const std::string& name, const std::vector<int64_t>& v,
                bool as_attribute, std::vector<hsize_t> dims) {
  if (dims.empty()) dims.push_back(v.size());
  const H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
  if (as_attribute) {
    static_cast<H5::H5Object&>(where)
        .createAttribute(name, H5::PredType::NATIVE_INT64, space)
        .write(H5::PredType::NATIVE_INT64, v.data());
  } else {
    where.createDataSet(name, H5::PredType::NATIVE_INT64, space)
        .write(v.data(), H5::PredType::NATIVE_INT64);
  }
}

void write_floats(H5::H5File& file, const std::string& name, const std::vector<double>& values,
                  const std::vector<hsize_t>& dims) {
  const std::vector<float> narrow(values.begin(), values.end());
  file.createDataSet(name, H5::PredType::NATIVE_FLOAT,
                     H5::DataSpace(static_cast<int>(dims.size()), dims.data()))
      .write(narrow.data(), H5::PredType::NATIVE_FLOAT);
}

void write_strings(H5::H5File& file, const std::string& name,
                   const std::vector<std::string>& values) {
  size_t width = 1;
  for (const std::string& value : values) width = std::max(width, value.size());
  std::vector<char> packed(values.size() * width, '\0');
  for (size_t i = 0; i < values.size(); ++i) values[i].copy(packed.data() + i * width, width);
  const hsize_t size = values.size();
  const H5::StrType type(H5::PredType::C_S1, width);
  type.setStrpad(H5T_STR_NULLPAD);
  file.createDataSet(name, type, H5::DataSpace(1, &size)).write(packed.data(), type);
}

void write_scalar(H5::H5File& file, const std::string& name, const H5::PredType& type,
                  const void* value) {
  file.createAttribute(name, type, H5::DataSpace()).write(type, value);
}

void write_tokens(H5::H5File& file, const nn::SequenceBatch& batch,
                  const std::vector<int64_t>& answer) {
  write_ints(file, "inputs", batch.inputs.values, false);
  write_ints(file, "answer", answer, false);
  if (!batch.source.shape.empty()) write_ints(file, "source", batch.source.values, false);
}

}  // namespace gradlab::interp::hdf5
