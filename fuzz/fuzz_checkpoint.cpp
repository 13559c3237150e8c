// libFuzzer target: read_checkpoint (and read_checkpoint_config) on a file whose bytes are the
// input. HDF5 reads a path, so each input is written to a new file in a private temporary
// directory (in /dev/shm when there is one) and removed after reading. (A memfd opened as
// /proc/self/fd/<n> does not work: HDF5 fails to resolve its real path.) Every input gets a new
// file, so HDF5 never mistakes it for a file it already has open.
//
// What counts as a bug: any crash or sanitizer report, and any exception other than
// CheckpointError (read_checkpoint promises one-line CheckpointErrors for every bad file, so e.g.
// an H5::Exception or std::bad_alloc escaping is a finding). A file that loads must satisfy the
// reader's guarantees (ranks, element counts, optimizer names).
//
// Mutations: libFuzzer's own, then (7 times in 8) the HDF5 metadata checksums are recomputed
// (hdf5_checksums.h), so that mutated object headers and attributes get decoded rather than
// rejected at "incorrect metadata checksum".
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>

#include "autograd/error.h"
#include "fuzz/hdf5_checksums.h"
#include "train/checkpoint.h"
#include "train/config.h"

namespace {

using namespace gradlab;
using namespace gradlab::train;

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "fuzz_checkpoint: %s\n", what.c_str());
  std::abort();
}

// The private directory for the input files, removed at exit. (Never destroyed itself: the exit
// handler that removes the directory still needs its name.)
const std::string& input_dir() {
  static const std::string* const dir = [] {
    const std::filesystem::path base = std::filesystem::is_directory("/dev/shm")
                                           ? "/dev/shm"
                                           : std::filesystem::temp_directory_path();
    std::string pattern = (base / "gradlab-fuzz-checkpoint-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) bug("mkdtemp failed");
    return new std::string(pattern);
  }();
  static const bool cleanup = std::atexit([] {
                                std::error_code ignored;
                                std::filesystem::remove_all(*dir, ignored);
                              }) == 0;
  (void)cleanup;
  return *dir;
}

// The input as a file, removed at scope exit.
class InputFile {
 public:
  InputFile(const uint8_t* data, size_t size) {
    static uint64_t count = 0;
    path_ = input_dir() + "/input-" + std::to_string(count++) + ".h5";
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) bug("cannot create " + path_);
    for (size_t done = 0; done < size;) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) bug("cannot write " + path_);
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  ~InputFile() { ::unlink(path_.c_str()); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The one-line contract of CheckpointError: "<path>: ...", no line breaks.
void check_message(const std::string& path, const CheckpointError& e) {
  const std::string message = e.what();
  if (message.rfind(path + ": ", 0) != 0) bug("error does not start with the path: " + message);
  if (message.find('\n') != std::string::npos) bug("error spans lines: " + message);
}

void check_loaded(const CheckpointData& data) {
  for (const auto* group : {&data.model, &data.optimizer_state}) {
    for (const auto& [name, tensor] : *group) {
      if (!tensor.defined() || tensor.rank() > 8 || tensor.numel() > (int64_t{1} << 28)) {
        bug("loaded tensor violates the limits: " + name);
      }
    }
  }
  for (const auto& [name, tensor] : data.optimizer_state) {
    const std::string parameter = name.substr(0, name.find('/'));
    bool found = false;
    for (const auto& entry : data.model) found = found || entry.first == parameter;
    if (!found) bug("optimizer state for a parameter not in /model: " + name);
  }
  if (data.train.step < 0 || data.optimizer_step < 0 || data.train.best_step < 0) {
    bug("negative step loaded");
  }
}

// GRADLAB_FUZZ_VERBOSE=1 prints what became of each input (for looking at a corpus).
bool verbose() {
  static const bool on = std::getenv("GRADLAB_FUZZ_VERBOSE") != nullptr;
  return on;
}

template <class F>
void expect_checkpoint_errors_only(const std::string& path, F&& f) {
  try {
    f();
    if (verbose()) std::fprintf(stderr, "fuzz_checkpoint: loaded\n");
  } catch (const CheckpointError& e) {
    if (verbose()) std::fprintf(stderr, "fuzz_checkpoint: %s\n", e.what());
    check_message(path, e);
  } catch (const std::exception& e) {
    bug(std::string("unexpected exception: ") + e.what());
  } catch (...) {
    bug("unexpected non-standard exception");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const InputFile file(data, size);
  const std::string& path = file.path();
  expect_checkpoint_errors_only(path, [&] {
    const CheckpointData loaded = read_checkpoint(path);
    check_loaded(loaded);
    // What `gradlab eval` does next with the configuration, short of building the model.
    try {
      RunConfig config = from_entries(loaded.config, path);
      finalize(config);
    } catch (const ConfigError&) {
    }
  });
  expect_checkpoint_errors_only(path, [&] { read_checkpoint_config(path); });
  return 0;
}

// Weak: the standalone corpus replay (replay_main.cpp) links without libFuzzer and never mutates.
extern "C" __attribute__((weak)) size_t LLVMFuzzerMutate(uint8_t* data, size_t size,
                                                        size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  size = LLVMFuzzerMutate(data, size, max_size);
  if (seed % 8 != 0) gradlab::fuzz::fix_hdf5_checksums(data, size);
  return size;
}
