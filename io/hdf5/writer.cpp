// The in-memory HDF5 file the checkpoint writer builds (writer.h).
#include "io/hdf5/writer.h"

#include <cstring>
#include <vector>

#include "io/hdf5/errors.h"
#include "io/hdf5/types.h"
#include "io/hdf5_checksum.h"

namespace gradlab::io::hdf5 {

namespace {

// One value as a scalar attribute, several as a 1-D attribute.
template <class T>
void write_numbers(const H5::H5Object& object, const std::string& name, const H5::PredType& type,
                   const T* values, hsize_t count = 1) {
  const H5::DataSpace space = count == 1 ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(1, &count);
  object.createAttribute(name, type, space).write(native_type<T>(), values);
}

// Non-empty tensors with at least one axis are stored chunked, one chunk per tensor (at most 2^28
// elements, 2 GiB, under HDF5's 4 GiB chunk limit), so that HDF5's Fletcher-32 filter checksums
// their values and a flipped byte is reported on load. A chunk needs a simple dataspace with
// non-zero sizes: a rank-0 tensor is stored compact instead, its value inside the object header
// (which the 1.8 format checksums), and an empty tensor has no values to protect.
H5::DSetCreatPropList tensor_layout(const std::vector<hsize_t>& dims, int64_t numel) {
  H5::DSetCreatPropList layout;
  if (dims.empty()) {
    layout.setLayout(H5D_COMPACT);
  } else if (numel > 0) {
    layout.setChunk(static_cast<int>(dims.size()), dims.data());
    layout.setFletcher32();
  }
  return layout;
}

// HDF5's file image callbacks (udata is the FileImage being built). A property list copies its
// callbacks with their udata, hence the copy that shares it.
void* image_malloc(size_t size, H5FD_file_image_op_t, void* udata) {
  static_cast<FileImage*>(udata)->capacity = size;
  return std::malloc(size);
}
void* image_realloc(void* ptr, size_t size, H5FD_file_image_op_t, void* udata) {
  static_cast<FileImage*>(udata)->capacity = size;
  return std::realloc(ptr, size);
}
void* image_memcpy(void* dest, const void* src, size_t size, H5FD_file_image_op_t, void*) {
  return std::memcpy(dest, src, size);
}
herr_t image_free(void* ptr, H5FD_file_image_op_t op, void* udata) {
  if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE) {
    static_cast<FileImage*>(udata)->bytes.reset(static_cast<char*>(ptr));
  } else {
    std::free(ptr);
  }
  return 0;
}
void* share_udata(void* udata) {
  return udata;
}
herr_t keep_udata(void*) {
  return 0;
}

// The file's length from its superblock, after checking that the superblock is the one this
// writer makes and is intact: the 1.8 format's (version 2, at offset 0, 8-byte addresses and
// lengths) is 48 bytes: signature, version, sizes, flags, base address, extension address,
// end-of-file address, root group address, and the checksum of the 44 bytes before it.
size_t closed_file_size(const FileImage& image) {
  constexpr size_t kSize = 48, kEndOfFile = 28;
  const auto* bytes = reinterpret_cast<const uint8_t*>(image.bytes.get());
  if (bytes == nullptr) throw H5::Exception("H5Fclose", "the file stayed open");
  uint32_t stored = 0;
  uint64_t end_of_file = 0;
  if (image.capacity >= kSize) {
    for (size_t i = 0; i < 4; ++i) stored |= uint32_t{bytes[kSize - 4 + i]} << (8 * i);
    for (size_t i = 0; i < 8; ++i) end_of_file |= uint64_t{bytes[kEndOfFile + i]} << (8 * i);
  }
  if (image.capacity < kSize || std::memcmp(bytes, "\x89HDF\r\n\x1a\n", 8) != 0 || bytes[8] != 2 ||
      bytes[9] != 8 || bytes[10] != 8 || bytes[11] != 0 ||
      stored != hdf5_checksum(bytes, kSize - 4) || end_of_file < kSize ||
      end_of_file > image.capacity) {
    throw H5::Exception("H5Fclose", "unexpected superblock in the file image");
  }
  return static_cast<size_t>(end_of_file);
}

}  // namespace

H5::Group create_group(const H5::Group& parent, const std::string& name) {
  const Handle gcpl(checked(H5Pcreate(H5P_GROUP_CREATE), "H5Pcreate"), H5Pclose);
  const unsigned order = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;
  checked(H5Pset_link_creation_order(gcpl.get(), order), "H5Pset_link_creation_order");
  checked(H5Pset_attr_creation_order(gcpl.get(), order), "H5Pset_attr_creation_order");
  const Handle group(
      checked(H5Gcreate2(parent.getId(), name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
              "H5Gcreate2"),
      H5Gclose);
  return H5::Group(group.get());  // takes its own reference
}

void write_attr(const H5::H5Object& object, const std::string& name, int64_t value) {
  write_numbers(object, name, H5::PredType::STD_I64LE, &value);
}
void write_attr(const H5::H5Object& object, const std::string& name, uint64_t value) {
  write_numbers(object, name, H5::PredType::STD_U64LE, &value);
}
void write_attr(const H5::H5Object& object, const std::string& name, double value) {
  write_numbers(object, name, H5::PredType::IEEE_F64LE, &value);
}
void write_attr(const H5::H5Object& object, const std::string& name, const std::string& value) {
  H5::StrType type(H5::PredType::C_S1, value.size() + 1);
  type.setCset(H5T_CSET_UTF8);
  object.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, value);
}
void write_attr(const H5::H5Object& object, const std::string& name,
                const std::array<uint64_t, 4>& values) {
  write_numbers(object, name, H5::PredType::STD_U64LE, values.data(), values.size());
}

// Non-empty tensors with at least one axis are stored chunked, one chunk per tensor (at most 2^28

void write_tensor(const H5::Group& group, const std::string& name, const Tensor& tensor) {
  const std::vector<hsize_t> dims(tensor.shape().begin(), tensor.shape().end());
  const H5::DataSpace space = dims.empty()
                                  ? H5::DataSpace(H5S_SCALAR)
                                  : H5::DataSpace(static_cast<int>(dims.size()), dims.data());
  const bool f32 = tensor.dtype() == DType::Float32;
  const H5::DataSet dataset =
      group.createDataSet(name, f32 ? H5::PredType::IEEE_F32LE : H5::PredType::IEEE_F64LE, space,
                          tensor_layout(dims, tensor.numel()));
  if (tensor.numel() == 0) return;
  dispatch(tensor.dtype(), [&]<class T>() { dataset.write(tensor.data<T>(), native_type<T>()); });
}

FileImage build_image(const std::string& path, size_t expected_size,
                      const std::function<void(const H5::Group& root)>& fill) {
  const std::string item = "the file's image in memory";
  FileImage image;
  H5::H5File file = guarded(path, item, [&] {
    // The HDF5 1.8 file format: every object header carries a checksum, so damaged metadata is
    // detected, and any HDF5 from 1.8 on (h5py, h5dump) reads the file.
    H5::FileAccPropList access;
    access.setLibverBounds(H5F_LIBVER_V18, H5F_LIBVER_V18);
    access.setCore(expected_size, false);  // memory only, never the disk
    H5FD_file_image_callbacks_t callbacks{image_malloc, image_memcpy, image_realloc, image_free,
                                          share_udata,  keep_udata,   &image};
    checked(H5Pset_file_image_callbacks(access.getId(), &callbacks), "H5Pset_file_image_callbacks");
    // The 1.8 format indexes chunks with a B-tree whose nodes are sized for 2 * 32 chunks by
    // default; each tensor has one chunk, so the smallest nodes keep the file small.
    H5::FileCreatPropList create;
    create.setIstorek(1);
    return H5::H5File(path, H5F_ACC_TRUNC, create, access);
  });
  fill(file);
  guarded(path, item, [&] {
    file.close();
    image.size = closed_file_size(image);
  });
  return image;
}

}  // namespace gradlab::io::hdf5
