// What the checkpoint code's reader and writer share about HDF5 objects: the limits that keep a
// damaged or hostile file from requesting absurd allocations, the names of items in messages,
// and the HDF5 type of each C++ value type. Internal to the checkpoint code (not installed).
#pragma once

#include <H5Cpp.h>

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace gradlab::io::hdf5 {

// Limits that keep a damaged or hostile file from requesting absurd allocations.
constexpr int kMaxRank = 8;
constexpr hsize_t kMaxElements = hsize_t{1} << 28;

// "/config attribute 'lr'", "root attribute 'format'": an attribute as messages name it.
std::string attr_item(const std::string& object, const std::string& name);

// A name HDF5 stores as a single link.
bool is_link_name(const std::string& name);

// "[2,3]": a dataspace's dimensions in messages.
std::string dims_to_string(const std::vector<hsize_t>& dims);

template <class T>
const H5::PredType& native_type() {
  if constexpr (std::is_same_v<T, float>) {
    return H5::PredType::NATIVE_FLOAT;
  } else if constexpr (std::is_same_v<T, double>) {
    return H5::PredType::NATIVE_DOUBLE;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return H5::PredType::NATIVE_INT64;
  } else {
    static_assert(std::is_same_v<T, uint64_t>);
    return H5::PredType::NATIVE_UINT64;
  }
}

// "float32", "int64", "uint8", "string", "compound", ... for error messages.
std::string type_name(const H5::DataType& type);

}  // namespace gradlab::io::hdf5
