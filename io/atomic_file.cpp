#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "autograd/error.h"

namespace gradlab::io {
namespace {

namespace fs = std::filesystem;

constexpr const char* kTempMarker = ".tmp-";

[[noreturn]] void fail_with_errno(const std::string& path, const std::string& what) {
  throw FileError(path + ": " + what + ": " + std::strerror(errno));
}

void sync(const std::string& path, const std::string& target, int flags) {
  const int fd = ::open(target.c_str(), flags | O_CLOEXEC);
  if (fd < 0) fail_with_errno(path, "cannot open " + target + " to sync it");
  if (::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    errno = error;
    fail_with_errno(path, "cannot sync " + target);
  }
  ::close(fd);
}

std::string directory_of(const std::string& path) {
  const std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

void replace_file(const std::string& path, const std::function<void(const std::string&)>& write) {
  const std::string temp = path + kTempMarker + std::to_string(::getpid());
  try {
    // Created with POSIX first, so that a missing or unwritable directory is reported with the
    // system's reason rather than a library's.
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) fail_with_errno(path, "cannot create temporary file " + temp);
    ::close(fd);
    write(temp);
    sync(path, temp, O_RDONLY);
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      fail_with_errno(path, "cannot rename " + temp + " over it");
    }
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  sync(path, directory_of(path), O_RDONLY | O_DIRECTORY);
}

void replace_file_bytes(const std::string& path, const char* data, size_t size) {
  replace_file(path, [&](const std::string& temp) {
    const std::string what = "cannot write temporary file " + temp;
    const int fd = ::open(temp.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd < 0) fail_with_errno(path, what);
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int error = n == 0 ? EIO : errno;
        ::close(fd);
        errno = error;
        fail_with_errno(path, what);
      }
      done += static_cast<size_t>(n);
    }
    // Some file systems (NFS) report a failed write only when the file is closed.
    if (::close(fd) != 0) fail_with_errno(path, what);
  });
}

void replace_file_text(const std::string& path, const std::string& text) {
  replace_file_bytes(path, text.data(), text.size());
}

std::vector<std::string> remove_stale_temp_files(
    const std::string& dir, const std::function<bool(const std::string& target)>& ours) {
  std::vector<std::string> removed;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const size_t marker = name.rfind(kTempMarker);
    if (marker == std::string::npos || !entry.is_regular_file(error)) continue;
    const std::string digits = name.substr(marker + std::strlen(kTempMarker));
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos ||
        !ours(name.substr(0, marker))) {
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    // ESRCH: no such process. EPERM means it exists under another user: keep its file.
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    if (fs::remove(entry.path(), error)) removed.push_back(entry.path().string());
  }
  return removed;
}

}  // namespace gradlab::io
