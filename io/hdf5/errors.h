// The checkpoint code's error plumbing: the one-line CheckpointError ("<path>: <item>:
// <problem>"), HDF5 exceptions and failed C API calls turned into it with HDF5's own reason, and
// a scope guard for C API identifiers. Internal to the checkpoint code (not installed).
#pragma once

#include <H5Cpp.h>

#include <string>
#include <utility>

namespace gradlab::io::hdf5 {

// Throws the one-line error. Names and strings read from a damaged file may hold any bytes:
// line breaks and tabs become spaces, other control characters '?'.
[[noreturn]] void fail(const std::string& path, const std::string& what);

[[noreturn]] void fail(const std::string& path, const std::string& item,
                       const std::string& problem);

// For a failed POSIX call: appends strerror(errno).
[[noreturn]] void fail_errno(const std::string& path, const std::string& what);

// The innermost message on HDF5's error stack, or "" when it is empty.
std::string innermost_error();

// HDF5's own reason for the failure behind e: the innermost message on its error stack
// ("truncated file: eof = ..."), which says more than the C++ API's "H5Fopen failed". Must run
// before any other HDF5 call, since every call clears the stack.
std::string h5_reason(const H5::Exception& e);

// Runs f, turning an HDF5 exception into a CheckpointError naming path and item.
template <class F>
auto guarded(const std::string& path, const std::string& item, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const H5::Exception& e) {
    fail(path, item, h5_reason(e));
  }
}

// Throws H5::Exception (which guarded converts) when a C API call reports failure, with HDF5's
// reason taken now: the C++ objects closed while the exception unwinds clear the error stack.
template <class T>
T checked(T result, const char* function) {
  if (result < 0) {
    const std::string reason = innermost_error();
    throw H5::Exception(function, reason.empty() ? "failed" : reason);
  }
  return result;
}

// Closes a C API identifier at the end of its scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() { close_(id_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// HDF5 prints its error stack to stderr by default; the CheckpointError line replaces it.
void quiet_hdf5();

}  // namespace gradlab::io::hdf5
