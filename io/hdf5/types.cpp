// Item names and type names of the checkpoint code's messages (types.h).
#include "io/hdf5/types.h"

namespace gradlab::io::hdf5 {

std::string attr_item(const std::string& object, const std::string& name) {
  return (object == "/" ? std::string("root") : object) + " attribute '" + name + "'";
}

bool is_link_name(const std::string& name) {
  return !name.empty() && name != "." && name.find('/') == std::string::npos;
}

std::string dims_to_string(const std::vector<hsize_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

std::string type_name(const H5::DataType& type) {
  const std::string bits = std::to_string(type.getSize() * 8);
  switch (type.getClass()) {
    case H5T_INTEGER:
      return (H5Tget_sign(type.getId()) == H5T_SGN_NONE ? "uint" : "int") + bits;
    case H5T_FLOAT:
      return "float" + bits;
    case H5T_STRING:
      return "string";
    case H5T_ENUM:
      return "enum";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ARRAY:
      return "array";
    default:
      return "an unsupported type";
  }
}
}  // namespace gradlab::io::hdf5
