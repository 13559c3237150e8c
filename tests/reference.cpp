// Reader for the PyTorch reference fixture (see reference.h). Compiled into the test binary
// with the other tests/*.cpp files; it defines no tests itself.
#include "tests/reference.h"

#include <H5Cpp.h>

#include <stdexcept>
#include <utility>

namespace gradlab::testing {
namespace reference {

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error("reference " + file + ": " + what);
}

// Runs f, turning HDF5's exceptions into std::runtime_error with the file and path.
template <class F>
auto guarded(const std::string& file, const std::string& where, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const H5::Exception& e) {
    fail(file, where + ": " + e.getDetailMsg());
  }
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  std::string part;
  for (char c : path) {
    if (c == '/') {
      if (!part.empty()) parts.push_back(std::move(part));
      part.clear();
    } else {
      part += c;
    }
  }
  if (!part.empty()) parts.push_back(std::move(part));
  return parts;
}

H5::DataSet open_dataset(const std::string& file_name, const H5::H5File& file,
                         const std::string& path, H5T_class_t expected_class,
                         const char* expected_name) {
  return guarded(file_name, path, [&] {
    if (file.childObjType(path) != H5O_TYPE_DATASET) fail(file_name, path + ": not a dataset");
    H5::DataSet dataset = file.openDataSet(path);
    if (dataset.getTypeClass() != expected_class) {
      fail(file_name, path + ": expected " + expected_name + " values");
    }
    return dataset;
  });
}

Shape dataset_shape(const H5::DataSet& dataset) {
  const H5::DataSpace space = dataset.getSpace();
  std::vector<hsize_t> dims(static_cast<size_t>(space.getSimpleExtentNdims()));
  if (!dims.empty()) space.getSimpleExtentDims(dims.data());
  return Shape(dims.begin(), dims.end());
}

H5::Attribute open_attribute(const std::string& file_name, const H5::H5File& file,
                             const std::string& case_name, const std::string& attr,
                             H5T_class_t expected_class, const char* expected_name) {
  const std::string where = case_name + " attribute " + attr;
  return guarded(file_name, where, [&] {
    const H5::Group group = file.openGroup(case_name);
    if (!group.attrExists(attr)) fail(file_name, where + ": missing");
    H5::Attribute attribute = group.openAttribute(attr);
    if (attribute.getTypeClass() != expected_class) {
      fail(file_name, where + ": expected " + expected_name);
    }
    if (attribute.getSpace().getSimpleExtentNpoints() != 1) {
      fail(file_name, where + ": expected a scalar");
    }
    return attribute;
  });
}

void collect_names(const H5::Group& group, const std::string& prefix,
                   std::vector<std::string>& out) {
  for (hsize_t i = 0; i < group.getNumObjs(); ++i) {
    const std::string name = group.getObjnameByIdx(i);
    const H5O_type_t type = group.childObjType(name);
    if (type == H5O_TYPE_DATASET) {
      out.push_back(prefix + name);
    } else if (type == H5O_TYPE_GROUP) {
      collect_names(group.openGroup(name), prefix + name + "/", out);
    }
  }
}

}  // namespace reference

Reference::Reference(const std::string& path) : path_(path) {
  // Errors surface as exceptions; HDF5's own stack dump on stderr would only add noise.
  H5::Exception::dontPrint();
  file_ = reference::guarded(path_, "open",
                             [&] { return std::make_shared<H5::H5File>(path_, H5F_ACC_RDONLY); });
}

std::vector<std::string> Reference::cases() const {
  return reference::guarded(path_, "/", [&] {
    std::vector<std::string> out;
    const H5::Group root = file_->openGroup("/");
    for (hsize_t i = 0; i < root.getNumObjs(); ++i) {
      const std::string name = root.getObjnameByIdx(i);
      if (root.childObjType(name) == H5O_TYPE_GROUP) out.push_back(name);
    }
    return out;
  });
}

int64_t Reference::attr_int(const std::string& case_name, const std::string& attr) const {
  const H5::Attribute attribute =
      reference::open_attribute(path_, *file_, case_name, attr, H5T_INTEGER, "an integer");
  return reference::guarded(path_, case_name + " attribute " + attr, [&] {
    int64_t value = 0;
    attribute.read(H5::PredType::NATIVE_INT64, &value);
    return value;
  });
}

std::string Reference::attr_string(const std::string& case_name, const std::string& attr) const {
  const H5::Attribute attribute =
      reference::open_attribute(path_, *file_, case_name, attr, H5T_STRING, "a string");
  return reference::guarded(path_, case_name + " attribute " + attr, [&] {
    std::string value;
    attribute.read(attribute.getStrType(), value);
    return value;
  });
}

bool Reference::has(const std::string& dataset_path) const {
  return reference::guarded(path_, dataset_path, [&] {
    // H5Lexists fails rather than answering false when an intermediate group is missing, so
    // walk the path one link at a time.
    std::string prefix;
    for (const std::string& part : reference::split_path(dataset_path)) {
      prefix += "/" + part;
      if (!file_->nameExists(prefix)) return false;
    }
    return true;
  });
}

Tensor Reference::tensor(const std::string& dataset_path, DType dtype) const {
  const H5::DataSet dataset =
      reference::open_dataset(path_, *file_, dataset_path, H5T_FLOAT, "floating-point");
  return reference::guarded(path_, dataset_path, [&] {
    const Shape shape = reference::dataset_shape(dataset);
    std::vector<double> values(static_cast<size_t>(numel(shape)));
    if (!values.empty()) dataset.read(values.data(), H5::PredType::NATIVE_DOUBLE);
    return Tensor::from_vector(values, shape, dtype);
  });
}

Mask Reference::mask(const std::string& dataset_path) const {
  const H5::DataSet dataset =
      reference::open_dataset(path_, *file_, dataset_path, H5T_INTEGER, "integer");
  return reference::guarded(path_, dataset_path, [&] {
    const Shape shape = reference::dataset_shape(dataset);
    std::vector<uint8_t> values(static_cast<size_t>(numel(shape)));
    if (!values.empty()) dataset.read(values.data(), H5::PredType::NATIVE_UINT8);
    return Mask(shape, std::move(values));
  });
}

std::vector<std::string> Reference::names(const std::string& group_path) const {
  return reference::guarded(path_, group_path, [&] {
    const std::string path = group_path.empty() ? "/" : group_path;
    if (path != "/" && file_->childObjType(path) != H5O_TYPE_GROUP) {
      reference::fail(path_, group_path + ": not a group");
    }
    std::vector<std::string> out;
    reference::collect_names(file_->openGroup(path), "", out);
    return out;
  });
}

std::string reference_path() {
  return GRADLAB_TEST_FIXTURES_DIR "/reference.h5";
}

}  // namespace gradlab::testing
