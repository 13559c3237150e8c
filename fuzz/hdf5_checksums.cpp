// HDF5 metadata checksums (see hdf5_checksums.h). Layouts follow the HDF5 file format
// specification, version 3 (superblock version 2, object header version 2, fractal heap and
// version 2 B-tree structures); every read is bounds-checked against the image.
#include "fuzz/hdf5_checksums.h"

#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "io/hdf5_checksum.h"

namespace gradlab::fuzz {
namespace {

constexpr uint64_t kUndefined = ~uint64_t{0};

// A little-endian image with checked reads: every read outside it sets ok to false.
struct Image {
  uint8_t* data;
  size_t size;
  unsigned offset_size = 8;  // "size of offsets" and "size of lengths" from the superblock
  unsigned length_size = 8;

  bool has(uint64_t at, uint64_t count) const { return at <= size && count <= size - at; }
  bool signature(uint64_t at, const char* sig) const {
    return has(at, 4) && std::memcmp(data + at, sig, 4) == 0;
  }
  uint64_t read(uint64_t at, unsigned bytes, bool& ok) const {
    if (!has(at, bytes) || bytes > 8) {
      ok = false;
      return 0;
    }
    uint64_t value = 0;
    for (unsigned i = 0; i < bytes; ++i) value |= uint64_t{data[at + i]} << (8 * i);
    return value;
  }
  // Stores the checksum of [start, at) at `at`; returns whether it fit.
  bool store_checksum(uint64_t start, uint64_t at) {
    if (at < start || !has(at, 4)) return false;
    const uint32_t sum = io::hdf5_checksum(data + start, at - start);
    for (int i = 0; i < 4; ++i) data[at + i] = static_cast<uint8_t>(sum >> (8 * i));
    return true;
  }
};

// Every offset at which sig occurs.
std::vector<uint64_t> find_all(const Image& image, const char* sig) {
  std::vector<uint64_t> found;
  for (uint64_t at = 0; image.has(at, 4); ++at) {
    if (image.signature(at, sig)) found.push_back(at);
  }
  return found;
}

// Messages of an object header chunk [begin, end): records continuation messages (type 0x10:
// address and length of the next chunk).
void collect_continuations(const Image& image, uint64_t begin, uint64_t end, bool with_order,
                           std::vector<std::pair<uint64_t, uint64_t>>& out) {
  const unsigned header = with_order ? 6 : 4;
  uint64_t at = begin;
  while (at + header <= end) {
    bool ok = true;
    const uint64_t type = image.read(at, 1, ok);
    const uint64_t size = image.read(at + 1, 2, ok);
    if (!ok) return;
    at += header;
    if (at + size > end) return;
    if (type == 0x10 && size >= image.offset_size + image.length_size) {
      const uint64_t address = image.read(at, image.offset_size, ok);
      const uint64_t length = image.read(at + image.offset_size, image.length_size, ok);
      if (ok) out.emplace_back(address, length);
    }
    at += size;
  }
}

size_t fix_superblock(Image& image) {
  static const uint8_t kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
  if (!image.has(0, 12) || std::memcmp(image.data, kSignature, 8) != 0) return 0;
  const uint8_t version = image.data[8];
  if (version != 2 && version != 3) return 0;
  const unsigned offsets = image.data[9], lengths = image.data[10];
  if ((offsets != 2 && offsets != 4 && offsets != 8) ||
      (lengths != 2 && lengths != 4 && lengths != 8)) {
    return 0;
  }
  image.offset_size = offsets;
  image.length_size = lengths;
  return image.store_checksum(0, 12 + 4 * uint64_t{offsets}) ? 1 : 0;
}

size_t fix_object_headers(Image& image) {
  size_t fixed = 0;
  std::vector<std::pair<uint64_t, uint64_t>> continuations;
  std::vector<bool> with_order;  // per continuation: the owning header stores creation order
  for (const uint64_t start : find_all(image, "OHDR")) {
    bool ok = true;
    const uint64_t version = image.read(start + 4, 1, ok);
    const uint64_t flags = image.read(start + 5, 1, ok);
    if (!ok || version != 2) continue;
    uint64_t at = start + 6;
    if (flags & 0x20) at += 16;  // access, modification, change and birth times
    if (flags & 0x10) at += 4;   // attribute phase change values
    const unsigned width = 1u << (flags & 3);
    const uint64_t chunk = image.read(at, width, ok);
    at += width;
    if (!ok || !image.has(at, chunk)) continue;
    collect_continuations(image, at, at + chunk, flags & 0x04, continuations);
    with_order.resize(continuations.size(), (flags & 0x04) != 0);
    fixed += image.store_checksum(start, at + chunk) ? 1 : 0;
  }
  // Continuation chunks, which may themselves hold further continuations.
  std::set<uint64_t> done;
  for (size_t i = 0; i < continuations.size() && i < 4096; ++i) {
    const auto [address, length] = continuations[i];
    if (done.count(address) || length < 8 || !image.signature(address, "OCHK") ||
        !image.has(address, length)) {
      continue;
    }
    done.insert(address);
    collect_continuations(image, address + 4, address + length - 4, with_order[i], continuations);
    with_order.resize(continuations.size(), with_order[i]);
    fixed += image.store_checksum(address, address + length - 4) ? 1 : 0;
  }
  return fixed;
}

// A direct block of `block_size` bytes at address whose checksum field is at `field`
// (relative); the checksum covers the whole block with the field zeroed.
bool fix_direct_block(Image& image, uint64_t address, uint64_t block_size, uint64_t field) {
  if (address == kUndefined || !image.signature(address, "FHDB") || field + 4 > block_size ||
      !image.has(address, block_size)) {
    return false;
  }
  std::memset(image.data + address + field, 0, 4);
  const uint32_t sum = io::hdf5_checksum(image.data + address, block_size);
  for (int i = 0; i < 4; ++i)
    image.data[address + field + i] = static_cast<uint8_t>(sum >> (8 * i));
  return true;
}

unsigned log2_floor(uint64_t x) {
  unsigned n = 0;
  while (x > 1) {
    x >>= 1;
    ++n;
  }
  return n;
}

size_t fix_fractal_heaps(Image& image) {
  size_t fixed = 0;
  const unsigned O = image.offset_size, L = image.length_size;
  for (const uint64_t start : find_all(image, "FRHP")) {
    bool ok = true;
    const uint64_t version = image.read(start + 4, 1, ok);
    const uint64_t filter_length = image.read(start + 7, 2, ok);
    const uint64_t flags = image.read(start + 9, 1, ok);
    uint64_t at = start + 14 + 10 * uint64_t{L} + 2 * uint64_t{O};
    const uint64_t width = image.read(at, 2, ok);
    const uint64_t start_block = image.read(at + 2, L, ok);
    const uint64_t max_direct = image.read(at + 2 + L, L, ok);
    const uint64_t max_heap_bits = image.read(at + 2 + 2 * L, 2, ok);
    const uint64_t root = image.read(at + 6 + 2 * L, O, ok);
    const uint64_t root_rows = image.read(at + 6 + 2 * L + O, 2, ok);
    at += 8 + 2 * uint64_t{L} + O;
    if (!ok || version != 0 || filter_length != 0) continue;
    fixed += image.store_checksum(start, at) ? 1 : 0;

    const bool checksummed_blocks = flags & 0x02;
    const uint64_t offset_bytes = (max_heap_bits + 7) / 8;
    const uint64_t block_header = 5 + uint64_t{O} + offset_bytes;  // before the checksum field
    if (start_block == 0 || start_block > image.size || max_direct < start_block) continue;
    if (root_rows == 0) {
      if (checksummed_blocks) fixed += fix_direct_block(image, root, start_block, block_header);
      continue;
    }
    // Root indirect block: direct-block rows first, `width` entries each.
    if (root == kUndefined || !image.signature(root, "FHIB") || width == 0 || width > 65536) {
      continue;
    }
    const uint64_t direct_rows = log2_floor(max_direct) - log2_floor(start_block) + 2;
    const uint64_t rows_of_blocks = std::min(root_rows, direct_rows);
    const uint64_t indirect_entries =
        root_rows > direct_rows ? (root_rows - direct_rows) * width : 0;
    const uint64_t entries_at = root + block_header;
    const uint64_t checksum_at = entries_at + (rows_of_blocks * width + indirect_entries) * O;
    if (!image.has(root, checksum_at - root + 4)) continue;
    for (uint64_t row = 0; row < rows_of_blocks; ++row) {
      const uint64_t block_size = row == 0 ? start_block : start_block << (row - 1);
      for (uint64_t column = 0; column < width; ++column) {
        const uint64_t child = image.read(entries_at + (row * width + column) * O, O, ok);
        if (ok && checksummed_blocks) {
          fixed += fix_direct_block(image, child, block_size, block_header);
        }
      }
    }
    fixed += image.store_checksum(root, checksum_at) ? 1 : 0;
  }
  return fixed;
}

size_t fix_btrees(Image& image) {
  size_t fixed = 0;
  const unsigned O = image.offset_size, L = image.length_size;
  for (const uint64_t start : find_all(image, "BTHD")) {
    bool ok = true;
    const uint64_t version = image.read(start + 4, 1, ok);
    const uint64_t record_size = image.read(start + 10, 2, ok);
    const uint64_t depth = image.read(start + 12, 2, ok);
    const uint64_t root = image.read(start + 16, O, ok);
    const uint64_t root_records = image.read(start + 16 + O, 2, ok);
    if (!ok || version != 0) continue;
    fixed += image.store_checksum(start, start + 18 + O + L) ? 1 : 0;
    // A root leaf: signature, version, type, the records, then the checksum.
    if (depth == 0 && root != kUndefined && image.signature(root, "BTLF")) {
      fixed += image.store_checksum(root, root + 6 + root_records * record_size) ? 1 : 0;
    }
  }
  return fixed;
}

}  // namespace

size_t fix_hdf5_checksums(uint8_t* data, size_t size) {
  Image image{data, size};
  size_t fixed = fix_superblock(image);  // first: it sets the sizes of offsets and lengths
  // No checksum covers another structure, so the order of the rest does not matter.
  fixed += fix_fractal_heaps(image);
  fixed += fix_btrees(image);
  fixed += fix_object_headers(image);
  return fixed;
}

}  // namespace gradlab::fuzz
