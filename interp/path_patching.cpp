// Path patching: the spec's parser (against the model's points), then the senders' output
// differences added at the receivers' inputs.
#include "interp/path_patching.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "autograd/ops.h"

namespace gradlab::interp {
namespace {

// What the spec is checked against: per layer, its heads, K/V heads and whether it has an MLP.
struct Layers {
  std::vector<int64_t> heads, kv_heads;
  std::vector<bool> mlp;
};

Layers layers_of(const std::vector<nn::HookPointInfo>& points) {
  Layers layers;
  for (const nn::HookPointInfo& point : points) {
    int64_t layer = -1;
    char suffix[64] = {};
    if (std::sscanf(point.name.c_str(), "blocks.%ld.%63s", &layer, suffix) != 2) continue;
    if (layer >= static_cast<int64_t>(layers.heads.size())) {
      layers.heads.resize(layer + 1, 0);
      layers.kv_heads.resize(layer + 1, 0);
      layers.mlp.resize(layer + 1, false);
    }
    const std::string s = suffix;
    if (s == "attn.hook_result") layers.heads[layer] = point.shape[2];
    if (s == "hook_k_input") layers.kv_heads[layer] = point.shape[2];
    if (s == "hook_mlp_out") layers.mlp[layer] = true;
  }
  return layers;
}

std::string trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

std::vector<std::string> parts_of(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(trimmed(part));
  return parts;
}

bool is_number(const std::string& text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), ::isdigit);
}

// Whether the sender writes to the stream before the receiver reads it (a layer's heads come
// before its MLP).
bool before(const PathSender& sender, const PathReceiver& receiver) {
  if (receiver.input == PathInput::Logits) return true;
  if (receiver.input == PathInput::Mlp) {
    return sender.layer < receiver.layer || (sender.layer == receiver.layer && sender.head >= 0);
  }
  return sender.layer < receiver.layer;
}

}  // namespace

std::string path_name(const PathSender& sender) {
  return std::to_string(sender.layer) + "." +
         (sender.head < 0 ? "mlp" : std::to_string(sender.head));
}

std::string path_name(const PathReceiver& receiver) {
  switch (receiver.input) {
    case PathInput::Logits:
      return "logits";
    case PathInput::Mlp:
      return std::to_string(receiver.layer) + ".mlp";
    default:
      return std::to_string(receiver.layer) + "." + std::to_string(receiver.head) + "." +
             (receiver.input == PathInput::Query ? "q"
              : receiver.input == PathInput::Key ? "k"
                                                 : "v");
  }
}

PathSpec parse_path(const std::string& spec, const std::vector<nn::HookPointInfo>& points) {
  const auto fail = [&](const std::string& what) -> ConfigError {
    return ConfigError("path '" + spec + "': " + what);
  };
  const Layers layers = layers_of(points);
  const int64_t num_layers = static_cast<int64_t>(layers.heads.size());
  if (num_layers == 0) throw fail("path patching reads decoder-only models (blocks.<i>)");
  const size_t arrow = spec.find("->");
  if (arrow == std::string::npos || spec.find("->", arrow + 2) != std::string::npos) {
    throw fail("not 'SENDERS -> RECEIVERS' (one '->')");
  }
  // "L" of a part, checked against the model.
  const auto layer_of = [&](const std::string& part, const std::string& text) {
    if (!is_number(text)) throw fail("'" + part + "' does not start with a layer number");
    const int64_t layer = std::stoll(text);
    if (layer >= num_layers) {
      throw fail("'" + part + "': no layer " + text + " (layers 0-" +
                 std::to_string(num_layers - 1) + ")");
    }
    return layer;
  };
  const auto head_of = [&](const std::string& part, int64_t layer, const std::string& text,
                           int64_t heads, const char* kind) {
    if (!is_number(text) || std::stoll(text) >= heads) {
      throw fail("'" + part + "': unknown " + kind + " " + text + " (layer " +
                 std::to_string(layer) + " has " + kind + "s 0-" + std::to_string(heads - 1) + ")");
    }
    return std::stoll(text);
  };
  const auto check_mlp = [&](const std::string& part, int64_t layer) {
    if (!layers.mlp[layer])
      throw fail("'" + part + "': layer " + std::to_string(layer) + " has no MLP");
  };
  PathSpec path;
  for (const std::string& part : parts_of(spec.substr(0, arrow), ',')) {
    const std::vector<std::string> fields = parts_of(part, '.');
    if (fields.size() != 2) throw fail("sender '" + part + "' is not LAYER.HEAD or LAYER.mlp");
    PathSender sender{.layer = layer_of(part, fields[0])};
    if (fields[1] == "mlp") {
      check_mlp(part, sender.layer);
    } else {
      sender.head = head_of(part, sender.layer, fields[1], layers.heads[sender.layer], "head");
    }
    path.senders.push_back(sender);
  }
  for (const std::string& part : parts_of(spec.substr(arrow + 2), ',')) {
    const std::vector<std::string> fields = parts_of(part, '.');
    std::vector<PathReceiver> receivers;
    if (part == "logits") {
      receivers.push_back({});
    } else if (fields.size() == 2 && fields[1] == "mlp") {
      const int64_t layer = layer_of(part, fields[0]);
      check_mlp(part, layer);
      receivers.push_back({.input = PathInput::Mlp, .layer = layer});
    } else if (fields.size() == 2 || fields.size() == 3) {
      const int64_t layer = layer_of(part, fields[0]);
      const std::string which = fields.size() == 3 ? fields[2] : "qkv";
      if (which != "q" && which != "k" && which != "v" && which != "qkv") {
        throw fail("receiver '" + part + "' reads q, k or v, not '" + which + "'");
      }
      for (const char input : which) {
        const bool query = input == 'q';
        const int64_t heads = query ? layers.heads[layer] : layers.kv_heads[layer];
        // Keys and values are named by their K/V head; "L.h" names query head h's K/V head.
        const int64_t head =
            query || fields.size() == 3
                ? head_of(part, layer, fields[1], heads, query ? "head" : "K/V head")
                : head_of(part, layer, fields[1], layers.heads[layer], "head") /
                      (layers.heads[layer] / heads);
        receivers.push_back({.input = query          ? PathInput::Query
                                      : input == 'k' ? PathInput::Key
                                                     : PathInput::Value,
                             .layer = layer,
                             .head = head});
      }
    } else {
      throw fail("receiver '" + part + "' is not LAYER.HEAD[.q|.k|.v], LAYER.mlp or logits");
    }
    for (const PathReceiver& receiver : receivers) {
      if (std::none_of(path.senders.begin(), path.senders.end(),
                       [&](const PathSender& s) { return before(s, receiver); })) {
        throw fail("receiver " + path_name(receiver) + " comes before every sender");
      }
      const auto same = [&](const PathReceiver& r) {
        return r.input == receiver.input && r.layer == receiver.layer && r.head == receiver.head;
      };
      // "1.0, 1.1" share a K/V head when grouped: its input takes the difference once.
      if (std::none_of(path.receivers.begin(), path.receivers.end(), same)) {
        path.receivers.push_back(receiver);
      }
    }
  }
  if (path.senders.empty() || path.receivers.empty()) throw fail("no senders or no receivers");
  return path;
}

namespace {

// The point a receiver's input passes (its split input, or the stream the final norm reads).
std::string receiver_point(const PathReceiver& receiver, int64_t last_layer) {
  const std::string block = "blocks." + std::to_string(receiver.layer) + ".";
  switch (receiver.input) {
    case PathInput::Query:
      return block + "hook_q_input";
    case PathInput::Key:
      return block + "hook_k_input";
    case PathInput::Value:
      return block + "hook_v_input";
    case PathInput::Mlp:
      return block + "hook_mlp_in";
    case PathInput::Logits:
      break;
  }
  return "blocks." + std::to_string(last_layer) + ".hook_resid_post";
}

std::string sender_point(const PathSender& sender) {
  return "blocks." + std::to_string(sender.layer) +
         (sender.head < 0 ? ".hook_mlp_out" : ".attn.hook_result");
}

// A sender's output [B, T, C]: its head's slice of hook_result, or hook_mlp_out.
Tensor output_of(const nn::ActivationCache& cache, const PathSender& sender) {
  const Tensor& value = cache.at(sender_point(sender));
  if (sender.head < 0) return value;
  return reshape(narrow(value, 2, sender.head, 1), {value.size(0), value.size(1), value.size(3)});
}

}  // namespace

PathPatchResult patch_path(const nn::SequenceModel& model, const nn::SequenceBatch& clean,
                           const nn::SequenceBatch& corrupt, const PathSpec& path,
                           const std::function<double(const Tensor& logits)>& metric) {
  if (clean.inputs.shape != corrupt.inputs.shape || clean.source.shape != corrupt.source.shape) {
    throw ShapeError("path patching: the clean run reads " + to_string(clean.inputs.shape) +
                     ", the corrupted run " + to_string(corrupt.inputs.shape) +
                     ": it needs sequences of the same lengths");
  }
  NoGradGuard no_grad;
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, corrupt);
  const int64_t last_layer = static_cast<int64_t>(layers_of(points).heads.size()) - 1;
  std::vector<std::string> sender_points;
  for (const PathSender& sender : path.senders) sender_points.push_back(sender_point(sender));
  const nn::HookFilter senders(
      [&](const std::string& name) {
        return std::find(sender_points.begin(), sender_points.end(), name) != sender_points.end();
      },
      "the senders' outputs");
  const nn::ActivationCache clean_cache = run_with_cache(model, clean, senders);
  const nn::ActivationCache corrupt_cache = run_with_cache(model, corrupt, senders);

  // Per receiver point, the difference to add, one [B, T, 1, C] slice per head (or [B, T, C]).
  std::map<std::string, std::vector<Tensor>> added;
  for (const PathReceiver& receiver : path.receivers) {
    Tensor sum;
    for (const PathSender& sender : path.senders) {
      if (!before(sender, receiver)) continue;
      const Tensor difference = output_of(clean_cache, sender) - output_of(corrupt_cache, sender);
      sum = sum.defined() ? sum + difference : difference;
    }
    const std::string name = receiver_point(receiver, last_layer);
    const auto point = std::find_if(points.begin(), points.end(),
                                    [&](const nn::HookPointInfo& p) { return p.name == name; });
    std::vector<Tensor>& slices = added[name];
    if (point->shape.size() == 3) {
      slices.resize(1, Tensor::zeros(sum.shape(), sum.dtype()));
      slices[0] = slices[0] + sum;
      continue;
    }
    const Shape slice{sum.size(0), sum.size(1), 1, sum.size(2)};
    slices.resize(point->shape[2], Tensor::zeros(slice, sum.dtype()));
    slices[receiver.head] = slices[receiver.head] + reshape(sum, slice);
  }
  std::map<std::string, Tensor> differences;
  for (const auto& [name, slices] : added) {
    differences[name] = slices.size() == 1 && slices[0].rank() == 3 ? slices[0] : concat(slices, 2);
  }
  double scale = 0;
  const nn::HookFunction add = [&](const Tensor& value, const std::string& name) {
    return value + differences.at(name) * scale;
  };
  std::vector<nn::Hook> hooks;
  for (const auto& [name, difference] : differences) hooks.push_back({name, add});
  // The senders' layers read hook_result in every run, so that all take the same path.
  hooks.push_back({senders, [](const Tensor&, const std::string&) { return Tensor(); }});
  PathPatchResult result;
  result.clean = metric(clean_cache.logits);
  result.corrupt = metric(run_with_hooks(model, corrupt, hooks));
  scale = 1;
  result.patched = metric(run_with_hooks(model, corrupt, hooks));
  return result;
}

}  // namespace gradlab::interp
