// The layout of a checkpoint file (docs/checkpoint-format.md): the root attributes format and
// version, and the groups /config, /model, /optimizer and /train, written from CheckpointData and
// read back, each read checked as the file is trusted no further than it has been checked.
// Internal to the checkpoint code (not installed).
#pragma once

#include <H5Cpp.h>

#include <string>
#include <utility>
#include <vector>

#include "io/hdf5/file.h"
#include "io/hdf5/tensors.h"
#include "train/checkpoint.h"

namespace gradlab::train::hdf5 {

// The checkpoint's own sections and checks, over the generic HDF5 helpers of io/hdf5/.
using namespace io::hdf5;

// What the file will roughly take: the values plus room for the metadata, so that the core
// driver below allocates its buffer once. The driver zeroes the whole buffer, so the room is
// kept small; a file that outgrows it costs the driver a realloc by this size again.
size_t expected_file_size(const CheckpointData& data);

// The root attributes and every group of data, into the file's root group.
void write_sections(const std::string& path, const H5::Group& root, const CheckpointData& data);

// Opens path and checks its root attributes: a gradlab checkpoint of the version this build
// reads.
Source open_checkpoint(const std::string& path);

// /config's attributes in the order they were saved.
std::vector<ConfigEntry> read_config(const Source& source);

// The datasets of /model, checked, their values not read yet.
std::vector<StoredTensor> open_model(const Source& source);

// The datasets of /optimizer (group), each /optimizer/<parameter> naming a /model dataset.
std::vector<StoredTensor> open_optimizer_state(const Source& source, const H5::Group& group,
                                               const std::vector<StoredTensor>& model);

// /train's attributes (loss and loss_level are absent from files written before they were kept).
TrainState read_train(const Source& source);

// The names and shapes of tensors, for check_matching.
std::vector<std::pair<std::string, Shape>> shapes_of(const std::vector<StoredTensor>& tensors);

}  // namespace gradlab::train::hdf5
