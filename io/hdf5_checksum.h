// HDF5's metadata checksum: Jenkins' lookup3 hashlittle() with initial value 0, as the HDF5 file
// format stores it (little-endian) after the superblock, object headers, heaps and B-trees. The
// checkpoint writer checks the superblock of the file it built with it (checkpoint.cpp), the
// fuzzer repairs mutated metadata (fuzz/hdf5_checksums.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradlab::io {

uint32_t hdf5_checksum(const uint8_t* data, size_t length);

}  // namespace gradlab::io
