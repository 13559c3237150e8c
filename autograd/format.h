// Numbers as text, the way a person would type them back: integers in full, and doubles in the
// shortest form that reads back to the same value ("0.003", "1e-08", not 0.0030000000000000001).
// Every message, config file and help line that shows a number goes through here.
#pragma once

#include <charconv>
#include <concepts>
#include <string>

namespace gradlab {

inline std::string format_number(double value) {
  char buffer[32];  // the longest shortest form of a double is 24 characters
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

template <std::integral T>
std::string format_number(T value) {
  return std::to_string(value);
}

}  // namespace gradlab
