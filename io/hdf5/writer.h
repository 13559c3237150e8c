// The checkpoint writer's HDF5 side: groups that keep their members' creation order, scalar and
// 1-D attributes, checksummed tensor datasets, and the whole file built in memory (FileImage),
// so that writing it to disk is plain POSIX calls. Internal to the checkpoint code (not
// installed).
#pragma once

#include <H5Cpp.h>

#include <array>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "autograd/tensor.h"

namespace gradlab::io::hdf5 {

// Groups track the creation order of their links and attributes, so that read_checkpoint (and
// h5py) list parameters and config entries in the order they were saved rather than by name.
H5::Group create_group(const H5::Group& parent, const std::string& name);

// One scalar attribute each, in a fixed little-endian type.
void write_attr(const H5::H5Object& object, const std::string& name, int64_t value);
void write_attr(const H5::H5Object& object, const std::string& name, uint64_t value);
void write_attr(const H5::H5Object& object, const std::string& name, double value);
// Fixed-length (null-terminated) strings live in the attribute itself. Variable-length ones
// would live in a global heap, and HDF5 1.10 can hang reading a damaged global heap.
void write_attr(const H5::H5Object& object, const std::string& name, const std::string& value);
// A 1-D attribute of four values.
void write_attr(const H5::H5Object& object, const std::string& name,
                const std::array<uint64_t, 4>& values);

// A dataset holding the tensor in its own dtype (float32 or float64). Non-empty tensors with at
// least one axis are checksummed (Fletcher-32), one chunk each.
void write_tensor(const H5::Group& group, const std::string& name, const Tensor& tensor);

// The core driver's buffer, which build_image takes over when the file closes instead of
// letting HDF5 free it: the save writes from it, so the file is held in memory once, and the
// bytes are those of a closed file (superblock flags clear, checksum matching).
struct FileImage {
  std::unique_ptr<char, decltype(&std::free)> bytes{nullptr, &std::free};
  size_t capacity = 0;  // of the driver's buffer
  size_t size = 0;      // of the file: the superblock's end-of-file address
};

// The whole file, built in memory by HDF5's core driver: fill(root) writes its contents.
// expected_size (roughly the file's size) sizes the driver's buffer once. Every HDF5 object fill
// opens must be closed when it returns (locals of the functions it calls), and closing an
// in-memory file cannot fail on a full disk. Throws CheckpointError naming path.
FileImage build_image(const std::string& path, size_t expected_size,
                      const std::function<void(const H5::Group& root)>& fill);

}  // namespace gradlab::io::hdf5
