// Opening a checkpoint file and listing its members without trusting it (file.h).
#include "io/hdf5/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>
#include <utility>

#include "io/hdf5/errors.h"

namespace gradlab::io::hdf5 {

namespace {

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

}  // namespace

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
}  // namespace gradlab::io::hdf5
