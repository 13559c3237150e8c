// Checked reads of a checkpoint file's tensors (tensors.h).
#include "io/hdf5/tensors.h"

#include <utility>

#include "io/hdf5/errors.h"
#include "io/hdf5/types.h"

namespace gradlab::io::hdf5 {

namespace {

DType dataset_dtype(const std::string& path, const std::string& item, const H5::DataSet& dataset) {
  const H5::DataType type = dataset.getDataType();
  if (type.getClass() == H5T_FLOAT && type.getSize() == 4) return DType::Float32;
  if (type.getClass() == H5T_FLOAT && type.getSize() == 8) return DType::Float64;
  fail(path, item, "type " + type_name(type) + " is not float32 or float64");
}

Shape dataset_shape(const std::string& path, const std::string& item, const H5::DataSet& dataset) {
  const H5::DataSpace space = dataset.getSpace();
  const H5S_class_t space_class = space.getSimpleExtentType();
  if (space_class == H5S_SCALAR) return {};
  if (space_class != H5S_SIMPLE) fail(path, item, "no dataspace (null or unknown)");
  const int rank = space.getSimpleExtentNdims();
  if (rank > kMaxRank) fail(path, item, "rank " + std::to_string(rank) + " exceeds the limit of 8");
  std::vector<hsize_t> dims(static_cast<size_t>(rank));
  if (rank > 0) space.getSimpleExtentDims(dims.data());
  hsize_t count = 1;
  for (hsize_t dim : dims) {
    // Both factors are at most 2^28, so the product cannot overflow.
    if (dim > kMaxElements || (count *= dim) > kMaxElements) {
      fail(path, item, "shape " + dims_to_string(dims) + " has more than 2^28 elements");
    }
  }
  return Shape(dims.begin(), dims.end());
}

// Deflate, HDF5's only built-in compression, compresses at most 1032:1.
constexpr hsize_t kMaxDeflateRatio = 1032;

// A chunked dataset must have every chunk written (HDF5 would return fill values for the others),
// and uncompressed chunks must be full size (plus 4 bytes of Fletcher-32 checksum each).
// Compressed chunks may be far smaller than the values, but by no more than deflate can.
void check_chunks(const Source& source, const std::string& item, const H5::DataSet& dataset,
                  hsize_t stored, hsize_t needed, size_t element_size) {
  const std::string& path = source.path;
  const H5::DSetCreatPropList plist = dataset.getCreatePlist();
  const H5::DataSpace space = dataset.getSpace();
  const int rank = space.getSimpleExtentNdims();
  std::vector<hsize_t> dims(static_cast<size_t>(rank)), chunk(static_cast<size_t>(rank));
  space.getSimpleExtentDims(dims.data());
  if (plist.getChunk(rank, chunk.data()) != rank) fail(path, item, "damaged chunk layout");
  hsize_t chunk_elements = 1, expected_chunks = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    // Shape and chunk both hold at most 2^28 elements, so neither product overflows.
    if (chunk[i] == 0 || chunk[i] > kMaxElements || (chunk_elements *= chunk[i]) > kMaxElements) {
      fail(path, item, "chunk " + dims_to_string(chunk) + " is empty or above 2^28 elements");
    }
    expected_chunks *= (dims[i] + chunk[i] - 1) / chunk[i];
  }
  hsize_t chunks = 0;
  checked(H5Dget_num_chunks(dataset.getId(), space.getId(), &chunks), "H5Dget_num_chunks");
  if (chunks != expected_chunks) {
    fail(path, item,
         "values not written: " + std::to_string(chunks) + " of " +
             std::to_string(expected_chunks) + " chunks stored");
  }
  bool compressed = false;
  hsize_t checksums = 0;
  for (int i = 0; i < plist.getNfilters(); ++i) {
    unsigned flags = 0, config = 0;
    size_t count = 0;
    char name[64] = {};
    switch (H5Pget_filter2(plist.getId(), static_cast<unsigned>(i), &flags, &count, nullptr,
                           sizeof name, name, &config)) {
      case H5Z_FILTER_FLETCHER32:
        checksums = 4 * chunks;
        break;
      case H5Z_FILTER_SHUFFLE:
        break;
      case H5Z_FILTER_DEFLATE:
        compressed = true;
        break;
      default:
        fail(path, item,
             std::string("filter '") + name +
                 "' is not supported (only deflate, shuffle and fletcher32)");
    }
  }
  const hsize_t full = chunks * chunk_elements * element_size;
  if (!compressed && (stored < full || stored > full + checksums)) {
    fail(path, item,
         "stores " + std::to_string(stored) + " bytes but its chunks need " + std::to_string(full));
  }
  if (compressed && needed > kMaxDeflateRatio * stored) {
    fail(path, item,
         "stores " + std::to_string(stored) + " compressed bytes for " + std::to_string(needed) +
             ", more than deflate can compress");
  }
}

// The storage must hold the values the shape declares, within the file, before anything is
// allocated for them: a small damaged file must not get gigabytes allocated for data it does not
// hold (found by fuzzing with a lower malloc limit). Values kept in other files (external
// storage, virtual datasets) are refused, as external links are.
void check_storage(const Source& source, const std::string& item, const H5::DataSet& dataset,
                   hsize_t needed, size_t element_size) {
  const H5::DSetCreatPropList plist = dataset.getCreatePlist();
  if (plist.getExternalCount() > 0) {
    fail(source.path, item, "values in an external file (not allowed)");
  }
  const H5D_layout_t layout = plist.getLayout();
  const hsize_t stored = dataset.getStorageSize();
  if (layout == H5D_CHUNKED) {
    check_chunks(source, item, dataset, stored, needed, element_size);
  } else if (layout != H5D_CONTIGUOUS && layout != H5D_COMPACT) {
    fail(source.path, item, "a virtual dataset (not allowed)");
  } else if (stored != needed) {
    fail(source.path, item,
         "stores " + std::to_string(stored) + " bytes but its shape and type need " +
             std::to_string(needed));
  }
  if (stored > source.size) {
    fail(source.path, item,
         "claims " + std::to_string(stored) + " bytes, more than the file's " +
             std::to_string(source.size));
  }
}

Tensor read_values(const std::string& path, const StoredTensor& stored) {
  Tensor tensor = Tensor::empty(stored.shape, stored.dtype);
  if (tensor.numel() == 0) return tensor;
  try {
    dispatch(stored.dtype,
             [&]<class T>() { stored.dataset.read(tensor.mutable_data<T>(), native_type<T>()); });
  } catch (const H5::Exception& e) {
    const std::string reason = h5_reason(e);
    if (reason.find("Fletcher32") != std::string::npos) {
      fail(path, stored.item, "values fail their Fletcher-32 checksum: the file is damaged");
    }
    fail(path, stored.item, reason);
  }
  return tensor;
}

}  // namespace

StoredTensor open_tensor(const Source& source, const std::string& name, const std::string& item,
                         const H5::Group& group, const std::string& link) {
  return guarded(source.path, item, [&] {
    expect_child(source.path, item, group, link, H5O_TYPE_DATASET);
    H5::DataSet dataset = group.openDataSet(link);
    const DType dtype = dataset_dtype(source.path, item, dataset);
    const Shape shape = dataset_shape(source.path, item, dataset);
    const size_t size = dtype_size(dtype);
    check_storage(source, item, dataset, static_cast<hsize_t>(numel(shape)) * size, size);
    return StoredTensor{name, item, std::move(dataset), dtype, shape};
  });
}

std::vector<nn::NamedTensor> read_values(const std::string& path,
                                         const std::vector<StoredTensor>& stored) {
  std::vector<nn::NamedTensor> tensors;
  for (const StoredTensor& s : stored) tensors.emplace_back(s.name, read_values(path, s));
  return tensors;
}
}  // namespace gradlab::io::hdf5
