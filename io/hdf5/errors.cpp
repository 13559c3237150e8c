// The checkpoint code's errors (errors.h).
#include "io/hdf5/errors.h"

#include <cerrno>
#include <cstring>

#include "autograd/error.h"

namespace gradlab::io::hdf5 {

namespace {

herr_t keep_innermost(unsigned, const H5E_error2_t* error, void* out) {
  auto* message = static_cast<std::string*>(out);
  if (message->empty() && error->desc != nullptr) *message = error->desc;
  return 0;
}

}  // namespace

// Throws the one-line error. Names and strings read from a damaged file may hold any bytes:
// line breaks and tabs become spaces, other control characters '?'.
[[noreturn]] void fail(const std::string& path, const std::string& what) {
  std::string line = path + ": " + what;
  for (char& c : line) {
    if (c == '\n' || c == '\r' || c == '\t') {
      c = ' ';
    } else if ((c >= 0 && c < 0x20) || c == 0x7f) {
      c = '?';
    }
  }
  throw CheckpointError(line);
}

[[noreturn]] void fail(const std::string& path, const std::string& item,
                       const std::string& problem) {
  fail(path, item + ": " + problem);
}

// For a failed POSIX call: appends strerror(errno).
[[noreturn]] void fail_errno(const std::string& path, const std::string& what) {
  const int error = errno;
  fail(path, what + ": " + std::strerror(error));
}

std::string innermost_error() {
  std::string message;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &message);
  return message;
}

std::string h5_reason(const H5::Exception& e) {
  const std::string message = innermost_error();
  return message.empty() ? e.getDetailMsg() : message;
}

void quiet_hdf5() {
  H5::Exception::dontPrint();
}

}  // namespace gradlab::io::hdf5
