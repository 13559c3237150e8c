// Checked reads of a checkpoint file's attributes (attributes.h).
#include "io/hdf5/attributes.h"

#include <utility>

namespace gradlab::io::hdf5 {

namespace {

void expect_count(const std::string& path, const std::string& item, const H5::Attribute& attr,
                  hssize_t count) {
  const hssize_t found = attr.getSpace().getSimpleExtentNpoints();
  if (found == count) return;
  fail(path, item,
       (count == 1 ? std::string("expected a single value")
                   : "expected " + std::to_string(count) + " values") +
           ", found " + std::to_string(found));
}

template <class T, class Stored>
std::vector<T> read_converted(const std::string& path, const std::string& item,
                              const H5::Attribute& attr, size_t count) {
  std::vector<Stored> stored(count);
  attr.read(native_type<Stored>(), stored.data());
  std::vector<T> out;
  for (Stored value : stored) {
    if (!std::in_range<T>(value)) {
      fail(path, item, "value " + std::to_string(value) + " is out of range");
    }
    out.push_back(static_cast<T>(value));
  }
  return out;
}

}  // namespace

H5::Attribute open_attr(const std::string& path, const std::string& item,
                        const H5::H5Object& object, const std::string& name) {
  if (!object.attrExists(name)) fail(path, item, "missing");
  return object.openAttribute(name);
}

template <class T>
std::vector<T> read_integers(const std::string& path, const std::string& item,
                             const H5::Attribute& attr, size_t count) {
  const H5::DataType type = attr.getDataType();
  if (type.getClass() != H5T_INTEGER || type.getSize() > 8) {
    fail(path, item, "expected an integer, found " + type_name(type));
  }
  expect_count(path, item, attr, static_cast<hssize_t>(count));
  if (H5Tget_sign(type.getId()) == H5T_SGN_NONE) {
    return read_converted<T, uint64_t>(path, item, attr, count);
  }
  return read_converted<T, int64_t>(path, item, attr, count);
}

template std::vector<int64_t> read_integers<int64_t>(const std::string&, const std::string&,
                                                     const H5::Attribute&, size_t);
template std::vector<uint64_t> read_integers<uint64_t>(const std::string&, const std::string&,
                                                       const H5::Attribute&, size_t);

double read_double(const std::string& path, const std::string& item, const H5::Attribute& attr) {
  const H5::DataType type = attr.getDataType();
  if (type.getClass() != H5T_FLOAT) fail(path, item, "expected a float, found " + type_name(type));
  expect_count(path, item, attr, 1);
  double value = 0;
  attr.read(H5::PredType::NATIVE_DOUBLE, &value);
  return value;
}

std::string read_string(const std::string& path, const std::string& item,
                        const H5::Attribute& attr) {
  const H5::DataType type = attr.getDataType();
  if (type.getClass() != H5T_STRING) {
    fail(path, item, "expected a string, found " + type_name(type));
  }
  expect_count(path, item, attr, 1);
  std::string value;
  attr.read(attr.getStrType(), value);
  return value;
}

AttributeValue read_config_value(const std::string& path, const std::string& item,
                                 const H5::Attribute& attr) {
  switch (attr.getTypeClass()) {
    case H5T_INTEGER:
      return read_integers<int64_t>(path, item, attr, 1)[0];
    case H5T_FLOAT:
      return read_double(path, item, attr);
    case H5T_STRING:
      return read_string(path, item, attr);
    default:
      fail(path, item,
           "expected an integer, float or string, found " + type_name(attr.getDataType()));
  }
}

}  // namespace gradlab::io::hdf5
