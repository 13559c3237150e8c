// Numbers as text, the way a person would type them back: integers in full, and doubles in the
// shortest form that reads back to the same value ("0.003", "1e-08", not 0.0030000000000000001).
// Every message, config file and help line that shows a number goes through here, and every
// message that echoes text a user gave goes through quote().
#pragma once

#include <charconv>
#include <concepts>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

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

// Bytes of user text a message shows before it stops with "...".
inline constexpr size_t kQuotedBytes = 80;

// text with its control characters escaped (\n, \x00, \x1b), so that it stays on one line:
// what every error message of the command line is passed through before it is printed, and
// what bounded() shows of user text.
inline std::string one_line(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (byte < 0x20 || byte == 0x7F) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

// Text from the user as an error message shows it: at most its first kQuotedBytes bytes (cut at
// a UTF-8 character boundary, then "..."), on one line (one_line), so that a 130 KB argument or
// one holding newlines still gives a short one-line message. The one place that shortens user
// text; quote() adds the quotes.
inline std::string bounded(std::string_view text) {
  size_t end = text.size();
  if (end > kQuotedBytes) {
    end = kQuotedBytes;
    while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  }
  std::string out = one_line(text.substr(0, end));
  if (end < text.size()) out += "...";
  return out;
}

// 'text', bounded as above.
inline std::string quote(std::string_view text) {
  // Appended, not "'" + ... + "'": g++ 12 reports a false -Wrestrict for that at -O2.
  std::string out = "'";
  out += bounded(text);
  out += '\'';
  return out;
}

// "a, b or c": the names of a table's rows, for help lines and errors.
inline std::string name_list(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

}  // namespace gradlab
