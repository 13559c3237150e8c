// Reading the attributes of a checkpoint file that may be damaged or hostile: each read checks
// the attribute's type class, width and count before it reads, and a value out of the range of
// the C++ type is an error naming the attribute. Internal to the checkpoint code (not installed).
#pragma once

#include <H5Cpp.h>

#include <cstdint>
#include <string>
#include <vector>

#include "io/attribute_value.h"
#include "io/hdf5/errors.h"
#include "io/hdf5/types.h"

namespace gradlab::io::hdf5 {

// The attribute `name` of object; a CheckpointError naming item when it is missing.
H5::Attribute open_attr(const std::string& path, const std::string& item,
                        const H5::H5Object& object, const std::string& name);

// Exactly count values of an integer attribute of any width up to 64 bits and either sign.
template <class T>
std::vector<T> read_integers(const std::string& path, const std::string& item,
                             const H5::Attribute& attr, size_t count);

// A single float of either width.
double read_double(const std::string& path, const std::string& item, const H5::Attribute& attr);

// A single string.
std::string read_string(const std::string& path, const std::string& item,
                        const H5::Attribute& attr);

// A /config value: an integer, a float or a string.
AttributeValue read_config_value(const std::string& path, const std::string& item,
                                 const H5::Attribute& attr);

// Opens attribute `name` of object (whose path is object_path) and reads it with read.
template <class Read>
auto read_attr(const std::string& path, const H5::H5Object& object, const std::string& object_path,
               const std::string& name, Read&& read) {
  const std::string item = attr_item(object_path, name);
  return guarded(path, item, [&] { return read(item, open_attr(path, item, object, name)); });
}

template <class T>
T integer_attr(const std::string& path, const H5::H5Object& object, const std::string& object_path,
               const std::string& name) {
  return read_attr(path, object, object_path, name, [&](const std::string& item, const auto& a) {
    return read_integers<T>(path, item, a, 1)[0];
  });
}

}  // namespace gradlab::io::hdf5
