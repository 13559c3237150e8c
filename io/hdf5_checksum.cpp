// HDF5's metadata checksum (see hdf5_checksum.h): lookup3's hashlittle(), after Bob Jenkins'
// public-domain lookup3.c, reading the bytes in little-endian order on any machine.
#include "io/hdf5_checksum.h"

#include <cstring>

namespace gradlab::io {
namespace {

uint32_t rot(uint32_t x, int k) {
  return (x << k) | (x >> (32 - k));
}

}  // namespace

uint32_t hdf5_checksum(const uint8_t* k, size_t length) {
  uint32_t a, b, c;
  a = b = c = 0xdeadbeef + static_cast<uint32_t>(length);
  auto mix = [&] {
    a -= c, a ^= rot(c, 4), c += b;
    b -= a, b ^= rot(a, 6), a += c;
    c -= b, c ^= rot(b, 8), b += a;
    a -= c, a ^= rot(c, 16), c += b;
    b -= a, b ^= rot(a, 19), a += c;
    c -= b, c ^= rot(b, 4), b += a;
  };
  auto word = [&](size_t i) {
    return uint32_t{k[i]} | uint32_t{k[i + 1]} << 8 | uint32_t{k[i + 2]} << 16 |
           uint32_t{k[i + 3]} << 24;
  };
  while (length > 12) {
    a += word(0);
    b += word(4);
    c += word(8);
    mix();
    length -= 12;
    k += 12;
  }
  if (length == 0) return c;
  // The last 1..12 bytes, zero-padded.
  uint8_t tail[12] = {};
  std::memcpy(tail, k, length);
  a += uint32_t{tail[0]} | uint32_t{tail[1]} << 8 | uint32_t{tail[2]} << 16 |
       uint32_t{tail[3]} << 24;
  b += uint32_t{tail[4]} | uint32_t{tail[5]} << 8 | uint32_t{tail[6]} << 16 |
       uint32_t{tail[7]} << 24;
  c += uint32_t{tail[8]} | uint32_t{tail[9]} << 8 | uint32_t{tail[10]} << 16 |
       uint32_t{tail[11]} << 24;
  c ^= b, c -= rot(b, 14);
  a ^= c, a -= rot(c, 11);
  b ^= a, b -= rot(a, 25);
  c ^= b, c -= rot(b, 16);
  a ^= c, a -= rot(c, 4);
  b ^= a, b -= rot(a, 14);
  c ^= b, c -= rot(b, 24);
  return c;
}

}  // namespace gradlab::io
