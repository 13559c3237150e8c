// A 64-bit fingerprint of bytes, to tell whether the processes of a training group hold the same
// data and state (not a cryptographic hash: it guards against mistakes, not against an
// adversary). Eight bytes at a time, so that a gigabyte of tokens takes a fraction of a second.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace gradlab::train {

constexpr uint64_t kFingerprintStart = 0xcbf29ce484222325ULL;

// The fingerprint of `size` bytes at `data`, continuing from `hash` (start with
// kFingerprintStart), so that several buffers chain into one.
inline uint64_t fingerprint(const void* data, size_t size, uint64_t hash = kFingerprintStart) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  auto mix = [&hash](uint64_t word) {
    hash = (hash ^ word) * 0x9e3779b97f4a7c15ULL;
    hash ^= hash >> 29;
  };
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, bytes + i, 8);
    mix(word);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, bytes + i, size - i);
  mix(tail ^ (static_cast<uint64_t>(size) << 56));
  return hash;
}

}  // namespace gradlab::train
