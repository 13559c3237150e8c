// The checkpoint reader's view of a file that may be damaged or hostile: opened only when it is
// a regular HDF5 file, its groups' members listed without trusting their counts, and each member
// checked to be a hard link to the kind of object expected. Internal to the checkpoint code (not
// installed).
#pragma once

#include <H5Cpp.h>

#include <string>
#include <vector>

namespace gradlab::io::hdf5 {

// The open file plus what every check needs to name problems.
struct Source {
  std::string path;
  H5::H5File file;
  hsize_t size = 0;
};

// Opens path read-only after checking that it is a regular file (not a FIFO, a device, a
// directory) and an HDF5 file; a truncated or unreadable one is a CheckpointError saying so.
H5::H5File open_hdf5(const std::string& path);

// The names of a group's links, or of its attributes: in creation order when the group indexes
// it, in name order otherwise.
std::vector<std::string> link_names(const H5::Group& group);
std::vector<std::string> attr_names(const H5::Group& group);

// Checks that parent has a hard link `name` to an object of type want.
void expect_child(const std::string& path, const std::string& item, const H5::Group& parent,
                  const std::string& name, H5O_type_t want);

// The group `name` of parent, checked with expect_child (item names it in messages).
H5::Group open_group(const std::string& path, const std::string& item, const H5::Group& parent,
                     const std::string& name);

}  // namespace gradlab::io::hdf5
