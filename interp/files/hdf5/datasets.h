// The HDF5 pieces the instruments' files share: integer, float and string datasets, scalar
// attributes, the tokens a model read, and a file written whole or not at all. Internal to
// interp/files/ (not installed: it includes HDF5's header).
#pragma once

#include <H5Cpp.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nn/sequence_model.h"

namespace gradlab::interp::hdf5 {

// Writes path through a temporary file that replaces it only when fill returned: a file that
// cannot be written is a FileError "<path>: cannot write <contents>: <HDF5's reason>".
void write_file(const std::string& path, const std::string& contents,
                const std::function<void(H5::H5File& file)>& fill);

// int64 values as a dataset of where (or, as_attribute, an attribute of it); dims: the shape,
// by default a vector of v's length.
void write_ints(H5::H5Location& where, const std::string& name, const std::vector<int64_t>& v,
                bool as_attribute, std::vector<hsize_t> dims = {});

// float32 dataset of shape dims from values (narrowed).
void write_floats(H5::H5File& file, const std::string& name, const std::vector<double>& values,
                  const std::vector<hsize_t>& dims);

// A 1-D dataset of fixed-length strings, null-padded to the longest, so that h5py reads them
// without a global heap: f[name].asstr()[:].
void write_strings(H5::H5File& file, const std::string& name,
                   const std::vector<std::string>& values);

// A scalar attribute of the file's root.
void write_scalar(H5::H5File& file, const std::string& name, const H5::PredType& type,
                  const void* value);

// The tokens the model read: /inputs [T], /answer [A] and, for the encoder-decoder, /source [S].
void write_tokens(H5::H5File& file, const nn::SequenceBatch& batch,
                  const std::vector<int64_t>& answer);

}  // namespace gradlab::interp::hdf5
