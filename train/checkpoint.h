// Checkpoints: one self-describing HDF5 file per save, readable with h5py or h5dump without
// gradlab. The layout, the atomic-save procedure and the versioning policy are described in
// docs/checkpoint-format.md.
//
// Every failure throws CheckpointError with one line of the form "<path>: <item>: <problem>",
// e.g. "runs/x/step-100.h5: /model/head.bias: missing from the checkpoint". Neither a failed save
// nor a failed load changes anything: a failed save leaves the previous file at the path intact,
// and restore_tensors checks every name and shape before it copies the first value.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "io/attribute_value.h"
#include "nn/module.h"

namespace gradlab::train {

constexpr const char* kCheckpointFormat = "gradlab-checkpoint";  // root attribute "format"
constexpr int64_t kCheckpointVersion = 1;                        // root attribute "version"

// The groups restore_tensors takes: parameters and optimizer state.
constexpr const char* kModelGroup = "/model";
constexpr const char* kOptimizerGroup = "/optimizer";

using ConfigValue = io::AttributeValue;
using ConfigEntry = std::pair<std::string, ConfigValue>;

// The training loop's own state, stored as attributes of /train.
struct TrainState {
  int64_t step = 0;                       // training steps completed
  uint64_t data_seed = 0;                 // seed of the data stream
  std::array<uint64_t, 4> dropout_rng{};  // dropout generator state
  double best_metric = -1;                // best validation metric so far (-1: none yet)
  int64_t best_step = 0;                  // step at which best_metric was reached
  // The training loss of the step the state comes from (NaN before the first step, and in files
  // written before it was kept): fit saves only after a finite one.
  double loss = std::numeric_limits<double>::quiet_NaN();
  // The running level of the loss that fit's loss-spike rule compares each step with (fit.h), so
  // that a resumed run judges a spike as the uninterrupted run would. NaN: no step judged yet, as
  // in files written before it was kept (the level then starts again from the next step's loss).
  double loss_level = std::numeric_limits<double>::quiet_NaN();
};

struct CheckpointData {
  // Every model, task, optimizer and training hyperparameter: one attribute each in /config,
  // kept in this order.
  std::vector<ConfigEntry> config;
  // Parameters by dotted name ("blocks.0.attn.q_proj.weight"): /model/<name>.
  std::vector<nn::NamedTensor> model;
  // Optimizer::steps(): attribute "step" of /optimizer.
  int64_t optimizer_step = 0;
  // Optimizer::state(), named "<parameter name>/<slot>": /optimizer/<parameter name>/<slot>.
  std::vector<nn::NamedTensor> optimizer_state;
  TrainState train;
};

// Writes data to path atomically: a temporary file in the same directory is written, closed,
// fsynced and renamed over path, then the directory is fsynced. Tensors are stored in their own
// dtype (float32 or float64), so values round-trip bit-identically, with a Fletcher-32 checksum.
// Throws CheckpointError for an invalid name (empty, containing '/', duplicated) before anything
// is written, and for a failed write (full disk, quota, read-only or failing device) with the
// system's reason; the temporary file is removed and the previous file at path stays intact.
void save_checkpoint(const std::string& path, const CheckpointData& data);

// A checkpoint file's bytes, built in memory once and written to one path or several: the
// training loop writes best.h5 and the step checkpoint of the same step from one image.
// save_checkpoint(path, data) is CheckpointImage(path, data).write_to(path). Building it first
// returns cached tensor buffers worth twice the file's expected size to the system
// (release_cached_storage), so the save does not add to a training run's peak memory.
class CheckpointImage {
 public:
  // Throws CheckpointError naming path (only named, not touched) for an invalid name.
  CheckpointImage(const std::string& path, const CheckpointData& data);
  // Writes the bytes to path atomically, with save_checkpoint's guarantees and errors.
  void write_to(const std::string& path) const;

 private:
  std::unique_ptr<char, void (*)(void*)> bytes_;
  size_t size_ = 0;
};

// Reads and validates the whole file: format, version, every group, attribute and dataset (type,
// rank, size, storage), and that each /optimizer/<parameter> names a /model dataset, all before
// the first tensor value is read. Tensors come back with the file's dtype and shape, in the order
// they were saved. A value that fails its checksum is an error naming its dataset.
CheckpointData read_checkpoint(const std::string& path);

// The live tensors a checkpoint is about to be restored into.
struct ExpectedTensors {
  std::vector<nn::NamedTensor> model;
  // Unchecked when absent (a model loaded without its optimizer).
  std::optional<std::vector<nn::NamedTensor>> optimizer_state;
};

// read_checkpoint, plus restore_tensors' checks of the names and shapes against expected before
// the first value is read, so that a file which does not fit the model costs no allocation.
CheckpointData read_checkpoint(const std::string& path, const ExpectedTensors& expected);

// Only the format, version and /config, without reading a tensor: a run's configuration at the
// cost of a few attributes (`gradlab inspect` prints the parameters too, so it reads the whole
// file).
std::vector<ConfigEntry> read_checkpoint_config(const std::string& path);

// The names and shapes of the /model datasets, in the order they were saved, without reading a
// value: what a loader compares with its /config before anything else is read.
std::vector<std::pair<std::string, Shape>> read_model_shapes(const std::string& path);

// The format, version, /config and /train, without reading a tensor: what a resume must know
// (the configuration of the model to build, the step) before the model exists to check the
// tensors against.
struct CheckpointHeader {
  std::vector<ConfigEntry> config;
  TrainState train;
};
CheckpointHeader read_checkpoint_header(const std::string& path);

// Copies the tensors read from group (kModelGroup or kOptimizerGroup) of the checkpoint at path
// into the live tensors with the same names, converting to each live tensor's dtype. The names
// must match exactly in both directions and every shape must be equal; all of this is checked
// before the first copy, so a failure leaves every live tensor unchanged.
void restore_tensors(const std::string& path, const char* group,
                     const std::vector<nn::NamedTensor>& stored,
                     const std::vector<nn::NamedTensor>& live);

// "42", "0.001" (shortest exact form) or the string itself, for printing a config.
std::string to_string(const ConfigValue& value);

}  // namespace gradlab::train
