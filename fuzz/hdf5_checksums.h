// Recomputes the checksums of HDF5 metadata in a file image, so that a mutated checkpoint gets
// past HDF5's checksum verification and the fuzzer reaches the code that decodes and validates
// the metadata (datatypes, dataspaces, layouts, attributes). Without this, almost every
// mutation of a gradlab checkpoint (HDF5 1.8 format: every object header is checksummed) ends
// at "incorrect metadata checksum". The checksum itself is io/hdf5_checksum.h.
//
// Covered: the version 2/3 superblock, object headers ("OHDR") and their continuation chunks
// ("OCHK"), fractal heap headers ("FRHP"), their root indirect blocks ("FHIB", direct-block rows
// only) and direct blocks ("FHDB"), and version 2 B-tree headers ("BTHD"). B-tree nodes and
// free-space sections keep their checksums (a change there is reported as damaged metadata).
// Structures are found by signature and bounds-checked; a damaged image is left as it is
// wherever it cannot be parsed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gradlab::fuzz {

// Rewrites every checksum it can locate; returns how many structures it checksummed.
size_t fix_hdf5_checksums(uint8_t* data, size_t size);

}  // namespace gradlab::fuzz
