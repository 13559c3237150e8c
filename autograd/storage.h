// The flat buffer behind a tensor. Every tensor allocation goes through here, so this is the
// one place where allocation policy (alignment, reuse) is decided.
//
// Buffers are recycled through a pool keyed by (rounded) size: a training step allocates the
// same sizes every step, so after the first step every buffer comes from the pool; a thread is
// given back a buffer it freed itself when one is among a size's most recently freed, so that
// threads training batch shares each keep to buffers their own core's cache holds. Fresh
// memory is expensive here: the kernel faults in every new page (about 10 us per 4 KiB on
// the machines this was tuned on), and glibc returns large blocks to the system on free.
// A storage may instead wrap a buffer someone else allocated (a numpy array's), which it keeps
// alive through an owner and never hands to the pool.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace gradlab {

class Storage {
 public:
  // Every storage's data is aligned to this (one cache line, one AVX-512 vector).
  static constexpr size_t kAlignment = 64;

  // Uninitialised, from the pool.
  explicit Storage(size_t bytes);
  // Wraps `bytes` bytes at `data`, which `owner` keeps valid: the storage holds `owner` until it
  // is destroyed and then releases it (once, on whatever thread drops the last handle, so an
  // owner whose release needs a lock, such as Python's GIL, takes it in its deleter). `data`
  // must be 64-byte aligned like every storage (the lane attention kernel dereferences vectors
  // of its buffers), and writable; throws gradlab::Error if it is not aligned or `owner` is
  // null.
  Storage(void* data, size_t bytes, std::shared_ptr<void> owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

  // A stamp that changes whenever the contents may have been written (see mark_written) and
  // that no other buffer ever carries, so a value derived from this buffer and kept with the
  // stamp it had is still valid while the stamp is unchanged.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  // Called before the contents are written: Tensor does it when it hands out a writable pointer.
  void mark_written();

 private:
  void* data_;
  size_t bytes_;
  std::atomic<uint64_t> version_;
  std::shared_ptr<void> owner_;  // set for a wrapped buffer, which the pool never sees
};

struct StorageStats {
  int64_t fresh_allocations = 0;  // buffers obtained from the system
  int64_t reused = 0;             // buffers served from the pool
  size_t cached_bytes = 0;        // free buffers held by the pool now
};

StorageStats storage_stats();
// Returns cached buffers to the system, largest first, until at least `at_least` bytes are
// released or none is left (by default all of them); returns the bytes released. Memory the
// process is about to need outside tensors (a checkpoint's file image) can come out of the
// pool this way instead of adding to the process's peak.
size_t release_cached_storage(size_t at_least = SIZE_MAX);

}  // namespace gradlab
