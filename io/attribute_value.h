// A scalar HDF5 attribute as gradlab's files store one: an integer, a float or a string. A
// checkpoint's /config holds its settings this way (train::ConfigValue).
#pragma once

#include <cstdint>
#include <string>
#include <variant>

namespace gradlab::io {

using AttributeValue = std::variant<int64_t, double, std::string>;

}  // namespace gradlab::io
