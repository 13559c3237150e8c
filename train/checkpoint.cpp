// Checkpoint files (see checkpoint.h and docs/checkpoint-format.md). HDF5's C++ API does most of
// the work; its C API fills the gaps: creation-order tracking, link iteration and the error stack.
#include "train/checkpoint.h"

#include <H5Cpp.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/storage.h"
#include "train/atomic_file.h"
#include "train/hdf5_checksum.h"

namespace gradlab::train {
namespace {

// Limits that keep a damaged or hostile file from requesting absurd allocations.
constexpr int kMaxRank = 8;
constexpr hsize_t kMaxElements = hsize_t{1} << 28;

// ---- Errors ------------------------------------------------------------------------------

// Throws the one-line error. Names and strings read from a damaged file may hold any bytes:
// line breaks and tabs become spaces, other control characters '?'.
[[noreturn]] void fail(const std::string& path, const std::string& what) {
  std::string line = path + ": " + what;
  for (char& c : line) {
    if (c == '\n' || c == '\r' || c == '\t') {
      c = ' ';
    } else if ((c >= 0 && c < 0x20) || c == 0x7f) {
      c = '?';
    }
  }
  throw CheckpointError(line);
}

[[noreturn]] void fail(const std::string& path, const std::string& item,
                       const std::string& problem) {
  fail(path, item + ": " + problem);
}

// For a failed POSIX call: appends strerror(errno).
[[noreturn]] void fail_errno(const std::string& path, const std::string& what) {
  const int error = errno;
  fail(path, what + ": " + std::strerror(error));
}

herr_t keep_innermost(unsigned, const H5E_error2_t* error, void* out) {
  auto* message = static_cast<std::string*>(out);
  if (message->empty() && error->desc != nullptr) *message = error->desc;
  return 0;
}

// HDF5's own reason for the failure behind e: the innermost message on its error stack
// ("truncated file: eof = ..."), which says more than the C++ API's "H5Fopen failed". Must run
// before any other HDF5 call, since every call clears the stack.
std::string h5_reason(const H5::Exception& e) {
  std::string message;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &message);
  return message.empty() ? e.getDetailMsg() : message;
}

// Runs f, turning an HDF5 exception into a CheckpointError naming path and item.
template <class F>
auto guarded(const std::string& path, const std::string& item, F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const H5::Exception& e) {
    fail(path, item, h5_reason(e));
  }
}

// Throws H5::Exception (which guarded converts) when a C API call reports failure, with HDF5's
// reason taken now: the C++ objects closed while the exception unwinds clear the error stack.
template <class T>
T checked(T result, const char* function) {
  if (result < 0) {
    std::string reason;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &reason);
    throw H5::Exception(function, reason.empty() ? "failed" : reason);
  }
  return result;
}

// Closes a C API identifier at the end of its scope.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() { close_(id_); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// HDF5 prints its error stack to stderr by default; the CheckpointError line replaces it.
void quiet_hdf5() {
  H5::Exception::dontPrint();
}

// ---- Names and items ---------------------------------------------------------------------

std::string attr_item(const std::string& object, const std::string& name) {
  return (object == "/" ? std::string("root") : object) + " attribute '" + name + "'";
}

// A name HDF5 stores as a single link.
bool is_link_name(const std::string& name) {
  return !name.empty() && name != "." && name.find('/') == std::string::npos;
}

std::string dims_to_string(const std::vector<hsize_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

template <class T>
const H5::PredType& native_type() {
  if constexpr (std::is_same_v<T, float>) {
    return H5::PredType::NATIVE_FLOAT;
  } else if constexpr (std::is_same_v<T, double>) {
    return H5::PredType::NATIVE_DOUBLE;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return H5::PredType::NATIVE_INT64;
  } else {
    static_assert(std::is_same_v<T, uint64_t>);
    return H5::PredType::NATIVE_UINT64;
  }
}

// "float32", "int64", "uint8", "string", "compound", ... for error messages.
std::string type_name(const H5::DataType& type) {
  const std::string bits = std::to_string(type.getSize() * 8);
  switch (type.getClass()) {
    case H5T_INTEGER:
      return (H5Tget_sign(type.getId()) == H5T_SGN_NONE ? "uint" : "int") + bits;
    case H5T_FLOAT:
      return "float" + bits;
    case H5T_STRING:
      return "string";
    case H5T_ENUM:
      return "enum";
    case H5T_COMPOUND:
      return "compound";
    case H5T_ARRAY:
      return "array";
    default:
      return "an unsupported type";
  }
}

// ---- Validation shared by save and load ----------------------------------------------------

void check_step(const std::string& path, const std::string& item, int64_t step) {
  if (step < 0) fail(path, item, "step " + std::to_string(step) + " is negative");
}

void check_tensor(const std::string& path, const std::string& item, const Tensor& tensor) {
  if (!tensor.defined()) fail(path, item, "undefined tensor");
  if (tensor.rank() > kMaxRank) {
    fail(path, item, "rank " + std::to_string(tensor.rank()) + " exceeds the limit of 8");
  }
  if (static_cast<hsize_t>(tensor.numel()) > kMaxElements) {
    fail(path, item, "more than 2^28 elements");
  }
}

// Model names are single links ("blocks.0.ln1.weight"); optimizer state names are
// "<parameter>/<slot>", a group and a link inside it.
void check_tensor_name(const std::string& path, const std::string& item, const std::string& name,
                       bool with_slot) {
  const size_t slash = name.find('/');
  const bool valid = with_slot
                         ? slash != std::string::npos && is_link_name(name.substr(0, slash)) &&
                               is_link_name(name.substr(slash + 1))
                         : is_link_name(name);
  if (!valid) {
    fail(path, item,
         with_slot ? "name is not '<parameter>/<slot>'" : "name is empty or contains '/'");
  }
}

void check_tensors(const std::string& path, const std::string& group,
                   const std::vector<nn::NamedTensor>& tensors, bool with_slots) {
  std::set<std::string> seen;
  for (const auto& [name, tensor] : tensors) {
    const std::string item = group + "/" + name;
    check_tensor_name(path, item, name, with_slots);
    if (!seen.insert(name).second) fail(path, item, "duplicate name");
    check_tensor(path, item, tensor);
  }
}

void check_savable(const std::string& path, const CheckpointData& data) {
  std::set<std::string> seen;
  for (const auto& entry : data.config) {
    const std::string item = attr_item("/config", entry.first);
    if (entry.first.empty()) fail(path, item, "empty name");
    if (!seen.insert(entry.first).second) fail(path, item, "duplicate name");
    const auto* text = std::get_if<std::string>(&entry.second);
    if (text && text->find('\0') != std::string::npos) fail(path, item, "string contains NUL");
  }
  check_tensors(path, kModelGroup, data.model, false);
  check_tensors(path, kOptimizerGroup, data.optimizer_state, true);
  check_step(path, attr_item(kOptimizerGroup, "step"), data.optimizer_step);
  check_step(path, attr_item("/train", "step"), data.train.step);
  check_step(path, attr_item("/train", "best_step"), data.train.best_step);
}

// ---- Writing -----------------------------------------------------------------------------

// Groups track the creation order of their links and attributes, so that read_checkpoint (and
// h5py) list parameters and config entries in the order they were saved rather than by name.
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

// One value as a scalar attribute, several as a 1-D attribute.
template <class T>
void write_numbers(const H5::H5Object& object, const std::string& name, const H5::PredType& type,
                   const T* values, hsize_t count = 1) {
  const H5::DataSpace space = count == 1 ? H5::DataSpace(H5S_SCALAR) : H5::DataSpace(1, &count);
  object.createAttribute(name, type, space).write(native_type<T>(), values);
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
// Fixed-length (null-terminated) strings live in the attribute itself. Variable-length ones
// would live in a global heap, and HDF5 1.10 can hang reading a damaged global heap.
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

void write_config(const std::string& path, const H5::Group& root,
                  const std::vector<ConfigEntry>& config) {
  const H5::Group group = guarded(path, "/config", [&] { return create_group(root, "config"); });
  for (const auto& [name, value] : config) {
    guarded(path, attr_item("/config", name),
            [&] { std::visit([&](const auto& v) { write_attr(group, name, v); }, value); });
  }
}

void write_model(const std::string& path, const H5::Group& root,
                 const std::vector<nn::NamedTensor>& model) {
  const H5::Group group = guarded(path, kModelGroup, [&] { return create_group(root, "model"); });
  for (const auto& [name, tensor] : model) {
    guarded(path, kModelGroup + ("/" + name), [&] { write_tensor(group, name, tensor); });
  }
}

void write_optimizer(const std::string& path, const H5::Group& root, const CheckpointData& data) {
  const H5::Group group = guarded(path, kOptimizerGroup, [&] {
    H5::Group created = create_group(root, "optimizer");
    write_attr(created, "step", data.optimizer_step);
    return created;
  });
  std::map<std::string, H5::Group> parameters;
  for (const auto& [name, tensor] : data.optimizer_state) {
    const size_t slash = name.find('/');
    const std::string parameter = name.substr(0, slash);
    guarded(path, kOptimizerGroup + ("/" + name), [&] {
      if (!parameters.contains(parameter)) {
        parameters.emplace(parameter, create_group(group, parameter));
      }
      write_tensor(parameters.at(parameter), name.substr(slash + 1), tensor);
    });
  }
}

void write_train(const std::string& path, const H5::Group& root, const TrainState& train) {
  guarded(path, "/train", [&] {
    const H5::Group group = create_group(root, "train");
    write_attr(group, "step", train.step);
    write_attr(group, "data_seed", train.data_seed);
    write_attr(group, "dropout_rng", train.dropout_rng);
    write_attr(group, "best_metric", train.best_metric);
    write_attr(group, "best_step", train.best_step);
    write_attr(group, "loss", train.loss);
  });
}

// What the file will roughly take: the values plus room for the metadata, so that the core
// driver below allocates its buffer once. The driver zeroes the whole buffer, so the room is
// kept small; a file that outgrows it costs the driver a realloc by this size again.
size_t expected_file_size(const CheckpointData& data) {
  size_t bytes = size_t{64} << 10;
  for (const auto* tensors : {&data.model, &data.optimizer_state}) {
    for (const auto& [name, tensor] : *tensors) {
      bytes += 1024 + static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype());
    }
  }
  return bytes;
}

// The core driver's buffer, which build_image takes over when the file closes instead of
// letting HDF5 free it: the save writes from it, so the file is held in memory once, and the
// bytes are those of a closed file (superblock flags clear, checksum matching).
struct FileImage {
  std::unique_ptr<char, decltype(&std::free)> bytes{nullptr, &std::free};
  size_t capacity = 0;  // of the driver's buffer
  size_t size = 0;      // of the file: the superblock's end-of-file address
};

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

// The whole file, built in memory by HDF5's core driver. Every HDF5 object is closed before the
// file (the groups are locals of the write_* functions), and closing an in-memory file cannot
// fail on a full disk.
FileImage build_image(const std::string& path, const CheckpointData& data) {
  const std::string item = "the file's image in memory";
  FileImage image;
  H5::H5File file = guarded(path, item, [&] {
    // The HDF5 1.8 file format: every object header carries a checksum, so damaged metadata is
    // detected, and any HDF5 from 1.8 on (h5py, h5dump) reads the file.
    H5::FileAccPropList access;
    access.setLibverBounds(H5F_LIBVER_V18, H5F_LIBVER_V18);
    access.setCore(expected_file_size(data), false);  // memory only, never the disk
    H5FD_file_image_callbacks_t callbacks{image_malloc, image_memcpy, image_realloc, image_free,
                                          share_udata,  keep_udata,   &image};
    checked(H5Pset_file_image_callbacks(access.getId(), &callbacks), "H5Pset_file_image_callbacks");
    // The 1.8 format indexes chunks with a B-tree whose nodes are sized for 2 * 32 chunks by
    // default; each tensor has one chunk, so the smallest nodes keep the file small.
    H5::FileCreatPropList create;
    create.setIstorek(1);
    return H5::H5File(path, H5F_ACC_TRUNC, create, access);
  });
  guarded(path, "/", [&] {
    write_attr(file, "format", std::string(kCheckpointFormat));
    write_attr(file, "version", kCheckpointVersion);
  });
  write_config(path, file, data.config);
  write_model(path, file, data.model);
  write_optimizer(path, file, data);
  write_train(path, file, data.train);
  guarded(path, item, [&] {
    file.close();
    image.size = closed_file_size(image);
  });
  return image;
}

// ---- Reading -----------------------------------------------------------------------------

// The open file plus what every check needs to name problems.
struct Source {
  std::string path;
  H5::H5File file;
  hsize_t size = 0;
};

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "an unknown kind of file";
}

// stat first, open second: opening a FIFO blocks until something writes to it, and opening a
// device can have effects of its own. The open (non-blocking, in case a FIFO took the file's
// place after the stat) reports a file that cannot be read with the system's reason.
void check_regular_file(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) fail_errno(path, "cannot open");
  if (!S_ISREG(info.st_mode)) {
    fail(path, std::string("not a regular file: ") + file_kind(info.st_mode));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail_errno(path, "cannot open");
  const bool regular = ::fstat(fd, &info) == 0 && S_ISREG(info.st_mode);
  ::close(fd);
  if (!regular) fail(path, std::string("not a regular file: ") + file_kind(info.st_mode));
}

// The number after `key` in text, if there is one.
std::optional<uint64_t> number_after(const std::string& text, const std::string& key) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return std::nullopt;
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  if (std::from_chars(text.data() + at + key.size(), end, value).ec != std::errc()) {
    return std::nullopt;
  }
  return value;
}

// HDF5 reports a short file as "truncated file: eof = 5486, sblock->base_addr = 0,
// stored_eof = 10972"; say that in plain words.
std::string open_failure(const std::string& reason) {
  const std::optional<uint64_t> size = number_after(reason, " eof = ");
  const std::optional<uint64_t> expected = number_after(reason, "stored_eof = ");
  if (reason.starts_with("truncated file") && size && expected) {
    return "truncated file: " + std::to_string(*size) + " bytes, its HDF5 header records " +
           std::to_string(*expected);
  }
  // The file starts like an HDF5 file but HDF5 cannot read its superblock (an 8-byte file holding
  // only the signature gets "bad byte number in an address"): say so before HDF5's words.
  return "not a readable HDF5 file, so not a checkpoint (HDF5: " + reason + ")";
}

H5::H5File open_hdf5(const std::string& path) {
  check_regular_file(path);
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 == 0) fail(path, "not an HDF5 file");
  try {
    checked(is_hdf5, "H5Fis_hdf5");
    return H5::H5File(path, H5F_ACC_RDONLY);
  } catch (const H5::Exception& e) {
    fail(path, open_failure(h5_reason(e)));
  }
}

// ---- Reading: links -----------------------------------------------------------------------

// Whether the group indexes its members by creation order (get_order reads the links' or the
// attributes' flags).
bool creation_order_indexed(const H5::Group& group, herr_t (*get_order)(hid_t, unsigned*)) {
  const Handle gcpl(checked(H5Gget_create_plist(group.getId()), "H5Gget_create_plist"), H5Pclose);
  unsigned flags = 0;
  checked(get_order(gcpl.get(), &flags), "H5Pget_creation_order");
  return (flags & H5P_CRT_ORDER_INDEXED) != 0;
}

// A member's name and, when the file records it, its creation order.
struct Member {
  bool has_order = false;
  int64_t order = 0;
  std::string name;
};

herr_t collect_link(hid_t, const char* name, const H5L_info_t* info, void* out) {
  static_cast<std::vector<Member>*>(out)->push_back({info->corder_valid > 0, info->corder, name});
  return 0;
}

herr_t collect_attr(hid_t, const char* name, const H5A_info_t* info, void* out) {
  static_cast<std::vector<Member>*>(out)->push_back({info->corder_valid > 0, info->corder, name});
  return 0;
}

// The names in creation order when the group indexes it, name order otherwise.
//
// HDF5 lists the members in its native order (a walk of the name index), and they are sorted
// here. Asking HDF5 for creation order instead makes HDF5 1.10 copy every member into a table
// sized by a count read from the file first, and when that count is larger than the number of
// members (a damaged B-tree header), it frees table entries it never filled: a crash inside
// H5Literate, found by fuzzing (fuzz/README.md). The native walk reports such a file as an error.
std::vector<std::string> sorted_names(std::vector<Member> members, bool by_creation_order) {
  by_creation_order = by_creation_order && std::all_of(members.begin(), members.end(),
                                                       [](const Member& m) { return m.has_order; });
  std::sort(members.begin(), members.end(), [&](const Member& a, const Member& b) {
    if (by_creation_order && a.order != b.order) return a.order < b.order;
    return a.name < b.name;
  });
  std::vector<std::string> names;
  for (Member& m : members) names.push_back(std::move(m.name));
  return names;
}

std::vector<std::string> link_names(const H5::Group& group) {
  std::vector<Member> members;
  checked(H5Literate(group.getId(), H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect_link, &members),
          "H5Literate");
  return sorted_names(std::move(members),
                      creation_order_indexed(group, H5Pget_link_creation_order));
}

std::vector<std::string> attr_names(const H5::Group& group) {
  std::vector<Member> members;
  checked(
      H5Aiterate2(group.getId(), H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, collect_attr, &members),
      "H5Aiterate2");
  return sorted_names(std::move(members),
                      creation_order_indexed(group, H5Pget_attr_creation_order));
}

const char* object_kind(H5O_type_t type) {
  switch (type) {
    case H5O_TYPE_GROUP:
      return "a group";
    case H5O_TYPE_DATASET:
      return "a dataset";
    case H5O_TYPE_NAMED_DATATYPE:
      return "a named datatype";
    default:
      return "an unknown object";
  }
}

// Checks that parent has a hard link `name` to an object of type want.
void expect_child(const std::string& path, const std::string& item, const H5::Group& parent,
                  const std::string& name, H5O_type_t want) {
  if (checked(H5Lexists(parent.getId(), name.c_str(), H5P_DEFAULT), "H5Lexists") == 0) {
    fail(path, item, "missing");
  }
  H5L_info_t info{};
  checked(H5Lget_info(parent.getId(), name.c_str(), &info, H5P_DEFAULT), "H5Lget_info");
  if (info.type != H5L_TYPE_HARD) fail(path, item, "a soft or external link (not allowed)");
  const H5O_type_t type = parent.childObjType(name);
  if (type != want) {
    fail(path, item, std::string("expected ") + object_kind(want) + ", found " + object_kind(type));
  }
}

H5::Group open_group(const std::string& path, const std::string& item, const H5::Group& parent,
                     const std::string& name) {
  return guarded(path, item, [&] {
    expect_child(path, item, parent, name, H5O_TYPE_GROUP);
    return parent.openGroup(name);
  });
}

// ---- Reading: attributes ------------------------------------------------------------------

H5::Attribute open_attr(const std::string& path, const std::string& item,
                        const H5::H5Object& object, const std::string& name) {
  if (!object.attrExists(name)) fail(path, item, "missing");
  return object.openAttribute(name);
}

void expect_count(const std::string& path, const std::string& item, const H5::Attribute& attr,
                  hssize_t count) {
  const hssize_t found = attr.getSpace().getSimpleExtentNpoints();
  if (found == count) return;
  fail(path, item,
       (count == 1 ? std::string("expected a single value")
                   : "expected " + std::to_string(count) + " values") +
           ", found " + std::to_string(found));
}

template <class T, class Stored>
std::vector<T> read_converted(const std::string& path, const std::string& item,
                              const H5::Attribute& attr, size_t count) {
  std::vector<Stored> stored(count);
  attr.read(native_type<Stored>(), stored.data());
  std::vector<T> out;
  for (Stored value : stored) {
    if (!std::in_range<T>(value)) {
      fail(path, item, "value " + std::to_string(value) + " is out of range");
    }
    out.push_back(static_cast<T>(value));
  }
  return out;
}

// Exactly count values of an integer attribute of any width up to 64 bits and either sign.
template <class T>
std::vector<T> read_integers(const std::string& path, const std::string& item,
                             const H5::Attribute& attr, size_t count) {
  const H5::DataType type = attr.getDataType();
  if (type.getClass() != H5T_INTEGER || type.getSize() > 8) {
    fail(path, item, "expected an integer, found " + type_name(type));
  }
  expect_count(path, item, attr, static_cast<hssize_t>(count));
  if (H5Tget_sign(type.getId()) == H5T_SGN_NONE) {
    return read_converted<T, uint64_t>(path, item, attr, count);
  }
  return read_converted<T, int64_t>(path, item, attr, count);
}

double read_double(const std::string& path, const std::string& item, const H5::Attribute& attr) {
  const H5::DataType type = attr.getDataType();
  if (type.getClass() != H5T_FLOAT) fail(path, item, "expected a float, found " + type_name(type));
  expect_count(path, item, attr, 1);
  double value = 0;
  attr.read(H5::PredType::NATIVE_DOUBLE, &value);
  return value;
}

std::string read_string(const std::string& path, const std::string& item,
                        const H5::Attribute& attr) {
  const H5::DataType type = attr.getDataType();
  if (type.getClass() != H5T_STRING) {
    fail(path, item, "expected a string, found " + type_name(type));
  }
  expect_count(path, item, attr, 1);
  std::string value;
  attr.read(attr.getStrType(), value);
  return value;
}

ConfigValue read_config_value(const std::string& path, const std::string& item,
                              const H5::Attribute& attr) {
  switch (attr.getTypeClass()) {
    case H5T_INTEGER:
      return read_integers<int64_t>(path, item, attr, 1)[0];
    case H5T_FLOAT:
      return read_double(path, item, attr);
    case H5T_STRING:
      return read_string(path, item, attr);
    default:
      fail(path, item,
           "expected an integer, float or string, found " + type_name(attr.getDataType()));
  }
}

// Opens attribute `name` of object (whose path is object_path) and reads it with read.
template <class Read>
auto read_attr(const std::string& path, const H5::H5Object& object, const std::string& object_path,
               const std::string& name, Read&& read) {
  const std::string item = attr_item(object_path, name);
  return guarded(path, item, [&] { return read(item, open_attr(path, item, object, name)); });
}

template <class T>
T integer_attr(const std::string& path, const H5::H5Object& object, const std::string& object_path,
               const std::string& name) {
  return read_attr(path, object, object_path, name, [&](const std::string& item, const auto& a) {
    return read_integers<T>(path, item, a, 1)[0];
  });
}

int64_t step_attr(const std::string& path, const H5::H5Object& object,
                  const std::string& object_path, const std::string& name) {
  const int64_t step = integer_attr<int64_t>(path, object, object_path, name);
  check_step(path, attr_item(object_path, name), step);
  return step;
}

// ---- Reading: tensors ---------------------------------------------------------------------

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

// A tensor dataset whose type, shape and storage are checked and whose values are not read yet.
struct StoredTensor {
  std::string name;  // as in CheckpointData: "<parameter>" or "<parameter>/<slot>"
  std::string item;  // "/model/<parameter>" or "/optimizer/<parameter>/<slot>"
  H5::DataSet dataset;
  DType dtype;
  Shape shape;
};

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

std::vector<nn::NamedTensor> read_values(const std::string& path,
                                         const std::vector<StoredTensor>& stored) {
  std::vector<nn::NamedTensor> tensors;
  for (const StoredTensor& s : stored) tensors.emplace_back(s.name, read_values(path, s));
  return tensors;
}

// ---- Reading: the sections ----------------------------------------------------------------

Source open_checkpoint(const std::string& path) {
  quiet_hdf5();
  Source source{path, open_hdf5(path)};
  source.size = guarded(path, "/", [&] { return source.file.getFileSize(); });
  const bool has_format = guarded(path, "/", [&] { return source.file.attrExists("format"); });
  if (!has_format) fail(path, "not a gradlab checkpoint (no root attribute 'format')");
  const std::string format =
      read_attr(path, source.file, "/", "format",
                [&](const std::string& item, const auto& a) { return read_string(path, item, a); });
  if (format != kCheckpointFormat) {
    fail(path, "format '" + format + "' is not a gradlab checkpoint");
  }
  const int64_t version = integer_attr<int64_t>(path, source.file, "/", "version");
  if (version != kCheckpointVersion) {
    fail(path, "version " + std::to_string(version) +
                   " is not supported (this build reads version " +
                   std::to_string(kCheckpointVersion) + ")");
  }
  return source;
}

std::vector<ConfigEntry> read_config(const Source& source) {
  const H5::Group group = open_group(source.path, "/config", source.file, "config");
  const std::vector<std::string> names =
      guarded(source.path, "/config", [&] { return attr_names(group); });
  std::vector<ConfigEntry> config;
  for (const std::string& name : names) {
    config.emplace_back(name, read_attr(source.path, group, "/config", name,
                                        [&](const std::string& item, const auto& a) {
                                          return read_config_value(source.path, item, a);
                                        }));
  }
  return config;
}

std::vector<StoredTensor> open_model(const Source& source) {
  const H5::Group group = open_group(source.path, kModelGroup, source.file, "model");
  std::vector<StoredTensor> model;
  for (const std::string& name :
       guarded(source.path, kModelGroup, [&] { return link_names(group); })) {
    model.push_back(open_tensor(source, name, kModelGroup + ("/" + name), group, name));
  }
  return model;
}

std::vector<StoredTensor> open_optimizer_state(const Source& source, const H5::Group& group,
                                               const std::vector<StoredTensor>& model) {
  std::set<std::string> parameters;
  for (const StoredTensor& entry : model) parameters.insert(entry.name);
  std::vector<StoredTensor> state;
  for (const std::string& parameter :
       guarded(source.path, kOptimizerGroup, [&] { return link_names(group); })) {
    const std::string item = kOptimizerGroup + ("/" + parameter);
    const H5::Group slots = open_group(source.path, item, group, parameter);
    if (!parameters.contains(parameter)) fail(source.path, item, "no such parameter in /model");
    for (const std::string& slot : guarded(source.path, item, [&] { return link_names(slots); })) {
      state.push_back(open_tensor(source, parameter + "/" + slot, item + "/" + slot, slots, slot));
    }
  }
  return state;
}

TrainState read_train(const Source& source) {
  const std::string& path = source.path;
  const H5::Group group = open_group(path, "/train", source.file, "train");
  TrainState train;
  train.step = step_attr(path, group, "/train", "step");
  train.data_seed = integer_attr<uint64_t>(path, group, "/train", "data_seed");
  const std::vector<uint64_t> rng =
      read_attr(path, group, "/train", "dropout_rng", [&](const std::string& item, const auto& a) {
        return read_integers<uint64_t>(path, item, a, 4);
      });
  std::copy(rng.begin(), rng.end(), train.dropout_rng.begin());
  train.best_metric =
      read_attr(path, group, "/train", "best_metric",
                [&](const std::string& item, const auto& a) { return read_double(path, item, a); });
  train.best_step = step_attr(path, group, "/train", "best_step");
  if (guarded(path, "/train", [&] { return group.attrExists("loss"); })) {
    train.loss = read_attr(
        path, group, "/train", "loss",
        [&](const std::string& item, const auto& a) { return read_double(path, item, a); });
  }
  return train;
}

std::vector<std::pair<std::string, Shape>> shapes_of(const std::vector<StoredTensor>& tensors) {
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const StoredTensor& t : tensors) shapes.emplace_back(t.name, t.shape);
  return shapes;
}

// The names of stored and live must match exactly in both directions, every shape must be equal
// and every live tensor defined (group names the owner in messages: "the model").
void check_matching(const std::string& path, const char* group,
                    const std::vector<std::pair<std::string, Shape>>& stored,
                    const std::vector<nn::NamedTensor>& live) {
  const std::string owner = std::string("the ") + (group[0] == '/' ? group + 1 : group);
  std::map<std::string, Shape> by_name(stored.begin(), stored.end());
  for (const auto& [name, tensor] : live) {
    const std::string item = std::string(group) + "/" + name;
    if (!tensor.defined()) fail(path, item, "the live tensor is undefined");
    const auto found = by_name.find(name);
    if (found == by_name.end()) fail(path, item, "missing from the checkpoint");
    if (found->second != tensor.shape()) {
      fail(path, item,
           "shape " + gradlab::to_string(found->second) + " does not match " + owner + "'s " +
               gradlab::to_string(tensor.shape()));
    }
    by_name.erase(found);
  }
  for (const auto& entry : stored) {
    if (by_name.contains(entry.first)) {
      fail(path, std::string(group) + "/" + entry.first, "unexpected: not in " + owner);
    }
  }
}

CheckpointData read_all(const std::string& path, const ExpectedTensors* expected) {
  const Source source = open_checkpoint(path);
  CheckpointData data;
  data.config = read_config(source);
  // Every name, type, shape and storage first, values last: a damaged file is refused, and a
  // file that does not fit the caller's model is reported as such, before a value is allocated.
  const std::vector<StoredTensor> model = open_model(source);
  const H5::Group optimizer = open_group(path, kOptimizerGroup, source.file, "optimizer");
  data.optimizer_step = step_attr(path, optimizer, kOptimizerGroup, "step");
  const std::vector<StoredTensor> state = open_optimizer_state(source, optimizer, model);
  data.train = read_train(source);
  if (expected) {
    check_matching(path, kModelGroup, shapes_of(model), expected->model);
    if (expected->optimizer_state) {
      check_matching(path, kOptimizerGroup, shapes_of(state), *expected->optimizer_state);
    }
  }
  data.model = read_values(path, model);
  data.optimizer_state = read_values(path, state);
  return data;
}

}  // namespace

// HDF5 builds the file in memory and plain POSIX calls write it (replace_file_bytes), so that a
// full disk, an exceeded quota or a failing device is one errno from write() or close(): HDF5
// 1.10 does not survive a failed write in its own close (a full disk ended in SIGSEGV inside
// H5Fclose). The price is the file's size in memory while saving (build_image's FileImage),
// taken from the tensor pool's cache where it has that much.
CheckpointImage::CheckpointImage(const std::string& path, const CheckpointData& data)
    : bytes_(nullptr, &std::free) {
  quiet_hdf5();
  check_savable(path, data);
  // Saves come between training steps, while the step's buffers sit idle in the tensor pool:
  // giving back as many of them as the build takes (the image, and about as much again that
  // HDF5 and the allocator take around it; with 1.5 times the image, the char run's peak stayed
  // 4 MiB above its training step's) keeps a run's peak memory that of its training step.
  release_cached_storage(2 * expected_file_size(data));
  FileImage image = build_image(path, data);
  bytes_.reset(image.bytes.release());
  size_ = image.size;
}

void CheckpointImage::write_to(const std::string& path) const {
  try {
    replace_file_bytes(path, bytes_.get(), size_);
  } catch (const FileError& e) {
    throw CheckpointError(e.what());
  }
}

void save_checkpoint(const std::string& path, const CheckpointData& data) {
  CheckpointImage(path, data).write_to(path);
}

CheckpointData read_checkpoint(const std::string& path, const ExpectedTensors& expected) {
  return read_all(path, &expected);
}

CheckpointData read_checkpoint(const std::string& path) {
  return read_all(path, nullptr);
}

std::vector<ConfigEntry> read_checkpoint_config(const std::string& path) {
  return read_config(open_checkpoint(path));
}

void restore_tensors(const std::string& path, const char* group,
                     const std::vector<nn::NamedTensor>& stored,
                     const std::vector<nn::NamedTensor>& live) {
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const auto& [name, tensor] : stored) shapes.emplace_back(name, tensor.shape());
  check_matching(path, group, shapes, live);
  const std::map<std::string, Tensor> by_name(stored.begin(), stored.end());
  std::vector<Tensor> sources;  // converted to the live dtypes before anything is copied
  for (const auto& [name, tensor] : live) {
    const Tensor& source = by_name.at(name);
    sources.push_back(source.dtype() == tensor.dtype() ? source : source.to(tensor.dtype()));
  }
  for (size_t i = 0; i < live.size(); ++i) {
    Tensor target = live[i].second;
    target.copy_from(sources[i]);
  }
}

std::string to_string(const ConfigValue& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return *text;
  if (const auto* integer = std::get_if<int64_t>(&value)) return format_number(*integer);
  return format_number(std::get<double>(value));
}

}  // namespace gradlab::train
