// The flat buffer behind a tensor. Every tensor allocation goes through here, so this is the
// one place where allocation policy (alignment, reuse) is decided.
#pragma once

#include <cstddef>

namespace gradlab {

class Storage {
 public:
  // Uninitialised, 64-byte aligned (one cache line, one AVX-512 vector).
  explicit Storage(size_t bytes);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_;
  size_t bytes_;
};

}  // namespace gradlab
