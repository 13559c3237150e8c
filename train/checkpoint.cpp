// Checkpoint files (see checkpoint.h and docs/checkpoint-format.md): the public entry points
// over io/hdf5/, where HDF5's C++ API does most of the work and its C API fills the gaps
// (creation-order tracking, link iteration and the error stack).
#include "train/checkpoint.h"

#include <cstdlib>
#include <map>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/storage.h"
#include "io/atomic_file.h"
#include "io/hdf5/attributes.h"
#include "io/hdf5/errors.h"
#include "io/hdf5/writer.h"
#include "train/io/checkpoint_checks.h"
#include "train/io/checkpoint_sections.h"

namespace gradlab::train {

using namespace hdf5;

namespace {

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
  FileImage image = build_image(path, expected_file_size(data),
                                [&](const H5::Group& root) { write_sections(path, root, data); });
  bytes_.reset(image.bytes.release());
  size_ = image.size;
}

void CheckpointImage::write_to(const std::string& path) const {
  try {
    io::replace_file_bytes(path, bytes_.get(), size_);
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

std::vector<std::pair<std::string, Shape>> read_model_shapes(const std::string& path) {
  return shapes_of(open_model(open_checkpoint(path)));
}

CheckpointHeader read_checkpoint_header(const std::string& path) {
  const Source source = open_checkpoint(path);
  return {read_config(source), read_train(source)};
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
