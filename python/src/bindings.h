// What the files of python/src/ share: the functions that declare each part of the library to
// Python, and the conversions between numpy arrays and the library's tensors and token arrays.
// pybind11 appears here and in python/ only, never in a library header.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "autograd/indices.h"
#include "autograd/tensor.h"
#include "data/task.h"
#include "data/text.h"
#include "nn/hooks.h"
#include "nn/sequence_model.h"
#include "train/config.h"
#include "train/trained_model.h"

namespace gradlab::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_arrays(py::module_& m);
void bind_tensor_ops(py::module_& m);
void bind_models(py::module_& m);
void bind_hooks(py::module_& m);
void bind_training(py::module_& m);
void bind_instruments(py::module_& m);
void bind_circuits(py::module_& m);
void bind_interventions(py::module_& m);
void bind_fourier(py::module_& m);
void bind_sae(py::module_& m);
void bind_report(py::module_& m);

// A numpy array sharing t's values (no copy), writable, keeping t's storage alive for as long
// as the array (or any view of it) lives.
py::array to_numpy(const Tensor& t);
// Whether from_numpy copies an array's values or shares its memory.
enum class ArrayCopy {
  Always,    // the tensor has its own storage, whatever the array
  IfNeeded,  // shares when the array's layout allows (see from_numpy), copies otherwise
  Never,     // shares, or throws ValueError naming why the array cannot be shared
};
// A tensor of a float32 or float64 array's values; throws TypeError for another dtype. `what`
// names the array in messages. A tensor can share the memory of a C-contiguous, writable array
// whose data is Storage::kAlignment-aligned; it then keeps the array (and so its memory's
// owner) alive as long as any tensor over that memory lives, and writes through either are
// seen by the other (numpy's do not change the tensor's version()).
Tensor from_numpy(const py::handle& array, const std::string& what,
                  ArrayCopy copy = ArrayCopy::Always);
// Token ids: any numpy integer array (or sequence of ints) of shape [B, T] or [T] (one
// sequence), as [B, T]. Throws TypeError for a float array, ValueError for an empty batch or
// another rank, IndexError for an id outside [0, vocab_size).
Indices to_tokens(const py::handle& tokens, int64_t vocab_size, const std::string& what);
py::array_t<int64_t> indices_to_numpy(const Indices& indices);

// A checkpoint opened for Python: the trained model train::load_trained_model reads (its run
// configuration, model, task and a language model's vocabulary), as every command of the
// command line reads it, with what Python's views of it need.
struct Checkpoint : train::TrainedModel {
  // Set once Python holds writable views of the parameters: the model's caches of derived
  // values (stacked weights) are then refreshed before every run (mark_parameters_written).
  bool views_out = false;
  void mark_parameters_written();
  // The model's hook points for longest_batch, listed once: their names are the same for
  // every batch.
  const std::vector<nn::HookPointInfo>& points();
  std::vector<nn::HookPointInfo> points_;
};
std::shared_ptr<Checkpoint> load_checkpoint(const std::string& path);

// The batch the model reads for tokens [B, T] (and source [B, S] for the encoder-decoder):
// targets are `targets` when given, else each position's next token (the last one ignored).
nn::SequenceBatch make_batch(const Checkpoint& checkpoint, const py::handle& tokens,
                             const py::handle& source, const py::handle& targets);

// A batch of one sequence of the longest layout the model reads (token 0 throughout): for
// listing its hook points without tokens.
nn::SequenceBatch longest_batch(const Checkpoint& checkpoint);

}  // namespace gradlab::python
