// Path patching (Wang et al. 2022; Goldowsky-Dill et al. 2023): a corrupted run in which the
// senders' clean outputs reach only the receivers, everything else keeping its corrupted value,
// scored as `gradlab patch` scores a site (0: the corrupted run, 1: the clean run). The residual
// stream is a sum, so a receiver's input is what it is in that run plus the sum, over the senders
// before it, of (the sender's clean output - its corrupted output); it is added at the block's
// split inputs (hook_q_input, hook_k_input, hook_v_input, hook_mlp_in; docs/hooks.md) or, for
// the logits, to the stream the final norm reads. Decoder-only models.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "nn/hooks.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

// A head (layer.head) or, with head -1, a layer's MLP (layer.mlp).
struct PathSender {
  int64_t layer = 0;
  int64_t head = -1;
};

enum class PathInput { Query, Key, Value, Mlp, Logits };

// A head's query, key or value input (head: the query head, or for keys and values the K/V
// head), a layer's MLP input, or the logits' direct path.
struct PathReceiver {
  PathInput input = PathInput::Logits;
  int64_t layer = -1;
  int64_t head = -1;
};

struct PathSpec {
  std::vector<PathSender> senders;
  std::vector<PathReceiver> receivers;
};

// "SENDERS -> RECEIVERS", each side comma-separated: senders "0.3" (layer 0, head 3) or "0.mlp";
// receivers "1.2.q", "1.2.k", "1.2.v", "1.2" (its three inputs), "1.mlp" or "logits". Checked
// against the model's points: ConfigError "path '<spec>': <what is wrong>" for a malformed spec,
// an unknown layer, head or MLP, or a receiver that no sender comes before.
PathSpec parse_path(const std::string& spec, const std::vector<nn::HookPointInfo>& points);

// "0.3", "0.mlp"; "1.2.k", "1.mlp", "logits".
std::string path_name(const PathSender& sender);
std::string path_name(const PathReceiver& receiver);

struct PathPatchResult {
  double clean = 0, corrupt = 0, patched = 0;  // metric(logits) of each run
  double score() const { return (patched - corrupt) / (clean - corrupt); }
};

// metric(logits [B, T, V]) of the clean run, the corrupted run and the corrupted run with the
// path patched. The corrupted run is scored with the same hooks adding zero, so that a path that
// carries nothing scores 0 exactly. clean and corrupt must read sequences of the same shapes
// (ShapeError otherwise). Runs without a graph, in the model's current mode.
PathPatchResult patch_path(const nn::SequenceModel& model, const nn::SequenceBatch& clean,
                           const nn::SequenceBatch& corrupt, const PathSpec& path,
                           const std::function<double(const Tensor& logits)>& metric);

}  // namespace gradlab::interp
