// Aligned tensor buffers, recycled through a size-keyed pool.
#include "autograd/storage.h"

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "autograd/error.h"

namespace gradlab {
namespace {

constexpr std::align_val_t kBufferAlignment{Storage::kAlignment};
// The pool keeps at most this much free memory; beyond it, buffers go back to the system.
constexpr size_t kMaxCachedBytes = size_t{256} << 20;
// How many of a size's most recently freed buffers a thread looks through for one of its own.
constexpr ptrdiff_t kOwnScan = 8;

// Sizes are rounded up so that nearly equal requests share a bucket: to 64 bytes below 4 KiB,
// to 4 KiB pages above.
size_t bucket_size(size_t bytes) {
  const size_t unit = bytes < 4096 ? 64 : 4096;
  return bytes == 0 ? unit : (bytes + unit - 1) / unit * unit;
}

// The pool's lock. Its holders run for a hash lookup and a push or pop; two threads training
// batch shares take it thousands of times a second. A std::mutex that finds it taken puts the
// thread to sleep, and waking it again costs tens of microseconds on a virtual CPU; this lock
// spins instead, and yields only if the holder keeps it long (its thread was preempted).
class SpinLock {
 public:
  void lock() {
    for (int spins = 0; held_.exchange(true, std::memory_order_acquire); ++spins) {
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins > kSpinsBeforeYield) {
          std::this_thread::yield();
        } else {
          __builtin_ia32_pause();
        }
      }
    }
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  static constexpr int kSpinsBeforeYield = 1 << 12;
  std::atomic<bool> held_{false};
};

// A free buffer and the thread that freed it, whose cache may still hold its lines.
struct Block {
  void* data;
  const void* thread;
};

const void* this_thread() {
  thread_local const char tag = 0;
  return &tag;
}

class Pool {
 public:
  void* acquire(size_t size) {
    {
      std::lock_guard lock(mutex_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        // The most recently freed of this thread's last few, else the most recent of all: a
        // buffer another core freed must first be fetched from that core's cache. Two threads
        // training batch shares took 10-13% longer a step without the preference.
        std::vector<Block>& blocks = it->second;
        const void* me = this_thread();
        const auto recent = blocks.rbegin() + std::min<ptrdiff_t>(std::ssize(blocks), kOwnScan);
        const auto mine =
            std::find_if(blocks.rbegin(), recent, [me](const Block& b) { return b.thread == me; });
        const auto taken = mine != recent ? std::prev(mine.base()) : std::prev(blocks.end());
        void* p = taken->data;
        blocks.erase(taken);
        stats_.cached_bytes -= size;
        ++stats_.reused;
        return p;
      }
      ++stats_.fresh_allocations;
    }
    return ::operator new(size, kBufferAlignment);
  }

  void release(void* p, size_t size) {
    {
      std::lock_guard lock(mutex_);
      if (stats_.cached_bytes + size <= kMaxCachedBytes) {
        free_[size].push_back({p, this_thread()});
        stats_.cached_bytes += size;
        return;
      }
    }
    ::operator delete(p, kBufferAlignment);
  }

  // Largest buffers first: the fewest buffers give the bytes back, and whole pages of them.
  size_t release_cached(size_t at_least) {
    size_t released = 0;
    {
      std::lock_guard lock(mutex_);
      std::vector<size_t> sizes;
      for (const auto& [size, blocks] : free_) sizes.push_back(size);
      std::sort(sizes.begin(), sizes.end(), std::greater<>());
      for (size_t size : sizes) {
        std::vector<Block>& blocks = free_[size];
        while (!blocks.empty() && released < at_least) {
          ::operator delete(blocks.back().data, kBufferAlignment);
          blocks.pop_back();
          released += size;
        }
        if (blocks.empty()) free_.erase(size);
      }
      stats_.cached_bytes -= released;
    }
    // glibc keeps freed heap memory mapped; trimming hands its free pages back to the kernel,
    // which is the point of releasing.
    if (released > 0) malloc_trim(0);
    return released;
  }

  StorageStats stats() {
    std::lock_guard lock(mutex_);
    return stats_;
  }

 private:
  SpinLock mutex_;
  std::unordered_map<size_t, std::vector<Block>> free_;
  StorageStats stats_;
};

// Never destroyed: tensors in static objects may be released after other statics are gone.
Pool& pool() {
  static Pool* instance = new Pool;
  return *instance;
}

// Stamps come from one counter shared by all buffers: a buffer that takes a freed one's place
// (same address, from the pool) still gets stamps its predecessor never had.
uint64_t next_version() {
  static std::atomic<uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

}  // namespace

Storage::Storage(size_t bytes)
    : data_(pool().acquire(bucket_size(bytes))), bytes_(bytes), version_(next_version()) {}

Storage::Storage(void* data, size_t bytes, std::shared_ptr<void> owner)
    : data_(data), bytes_(bytes), version_(next_version()), owner_(std::move(owner)) {
  if (!owner_) throw Error("storage: a wrapped buffer needs an owner to keep it alive");
  const auto address = reinterpret_cast<std::uintptr_t>(data);
  if (address % kAlignment != 0) {
    throw Error("storage: a wrapped buffer must be " + std::to_string(kAlignment) +
                "-byte aligned, its address is " + std::to_string(address % kAlignment) +
                " bytes past a boundary");
  }
}

Storage::~Storage() {
  if (!owner_) pool().release(data_, bucket_size(bytes_));
}

void Storage::mark_written() {
  version_.store(next_version(), std::memory_order_relaxed);
}

StorageStats storage_stats() {
  return pool().stats();
}

size_t release_cached_storage(size_t at_least) {
  return pool().release_cached(at_least);
}

}  // namespace gradlab
