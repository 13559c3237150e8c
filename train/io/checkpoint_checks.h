// The checks that save and load share: a checkpoint's names, steps and tensors are valid, and
// the tensors a file holds fit the live ones they are restored into (every failure a
// CheckpointError naming the item). Internal to the checkpoint code (not installed).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <H5Cpp.h>

#include "train/checkpoint.h"

namespace gradlab::train::hdf5 {

// The checkpoint's own sections and checks, over the generic HDF5 helpers of io/hdf5/.
using namespace io::hdf5;

// A step count, which is never negative.
void check_step(const std::string& path, const std::string& item, int64_t step);

// The step count attribute `name` of object, checked by check_step.
int64_t step_attr(const std::string& path, const H5::H5Object& object,
                  const std::string& object_path, const std::string& name);

// Everything save_checkpoint refuses before it writes anything: empty or duplicate config names,
// strings holding NUL, invalid or duplicate tensor names, undefined or oversized tensors,
// negative steps.
void check_savable(const std::string& path, const CheckpointData& data);

// The names of stored and live must match exactly in both directions, every shape must be equal
// and every live tensor defined (group names the owner in messages: "the model").
void check_matching(const std::string& path, const char* group,
                    const std::vector<std::pair<std::string, Shape>>& stored,
                    const std::vector<nn::NamedTensor>& live);

}  // namespace gradlab::train::hdf5
