// Direct logit attribution: the residual stream's parts, the frozen final norm and the
// unembedding, from one cached forward pass.
#include "interp/direct_logit_attribution.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/models.h"

namespace gradlab::interp {
namespace {

// What decomposition reads of a built-in model: the decoder-only model, or the encoder-decoder's
// decoder (its cross-attention heads write to the same stream; the encoder reaches it only
// through them).
struct DecodedStream {
  const nn::TokenAndPosition* embed;
  const std::vector<std::shared_ptr<nn::TransformerBlock>>* blocks;
  const nn::Norm* ln_f;    // null without a final norm
  const nn::Linear* head;  // null with tied embeddings
  std::string prefix;      // "blocks." or "decoder."
};

DecodedStream stream_of(const nn::SequenceModel& model) {
  if (const auto* m = dynamic_cast<const nn::DecoderLM*>(&model)) {
    return {m->embed.get(), &m->blocks, m->ln_f.get(), m->head.get(), "blocks."};
  }
  if (const auto* m = dynamic_cast<const nn::EncoderDecoder*>(&model)) {
    return {m->embed.get(), &m->decoder_blocks, m->ln_f.get(), m->head.get(), "decoder."};
  }
  throw ConfigError(
      "direct logit attribution: the residual stream of a model of one's own is unknown: it "
      "reads the built-in decoder and encoder-decoder");
}

int64_t layer_count(const DecodedStream& s) {
  return static_cast<int64_t>(s.blocks->size());
}

// layer as an index in [0, L], L meaning the final norm (layer -1 too).
int64_t stream_layer(const DecodedStream& s, int64_t layer, const char* caller) {
  const int64_t L = layer_count(s);
  if (layer < -1 || layer > L) {
    throw ConfigError(std::string(caller) + ": layer " + format_number(layer) + " is not in [-1, " +
                      format_number(L) + "] (-1 or " + format_number(L) + ": the final norm)");
  }
  return layer == -1 ? L : layer;
}

// A post-norm block normalises the sum after each sublayer: what reaches the head is then no
// sum of what the parts wrote.
void require_pre_norm(const nn::SequenceModel& model, const DecodedStream& s, const char* caller) {
  if (!model.config().block.pre_norm && !s.blocks->empty() && s.blocks->front()->ln1) {
    throw ConfigError(std::string(caller) +
                      ": a post-norm model's residual stream is not a sum of its parts (each "
                      "block's norm rescales it): direct logit attribution needs a pre-norm model");
  }
}

// The norm before block `layer` (L: the final norm).
const nn::Norm* norm_before(const DecodedStream& s, int64_t layer) {
  return layer == layer_count(s) ? s.ln_f : (*s.blocks)[static_cast<size_t>(layer)]->ln1.get();
}

Tensor as_one_part(const Tensor& part) {  // [B, T, C] -> [1, B, T, C]
  Shape shape = part.shape();
  shape.insert(shape.begin(), 1);
  return reshape(part, shape);
}

// bias [C] as a part of the stream [1, ..., C] shaped like residual [..., C].
Tensor bias_part(const Tensor& bias, const Shape& residual) {
  Shape shape = residual;
  shape.insert(shape.begin(), 1);
  return broadcast_to(bias, shape);
}

}  // namespace

std::vector<std::string> residual_blocks(const nn::SequenceModel& model) {
  const DecodedStream s = stream_of(model);
  std::vector<std::string> names;
  for (int64_t l = 0; l < layer_count(s); ++l) names.push_back(s.prefix + std::to_string(l));
  return names;
}

std::string residual_point(const nn::SequenceModel& model, int64_t layer) {
  const DecodedStream s = stream_of(model);
  const int64_t at = stream_layer(s, layer, "residual_point");
  if (at < layer_count(s)) return s.prefix + std::to_string(at) + ".hook_resid_pre";
  return s.prefix + std::to_string(at - 1) + ".hook_resid_post";
}

std::vector<std::string> decomposition_points(const nn::SequenceModel& model,
                                              const DecomposeOptions& options) {
  const DecodedStream s = stream_of(model);
  const int64_t end = stream_layer(s, options.layer, "decompose_residual");
  const bool heads = options.grain == ResidualGrain::Heads;
  std::vector<std::string> points;
  if (options.embeddings) points = {"embed.hook_token", "embed.hook_position"};
  for (int64_t l = 0; l < end; ++l) {
    const nn::TransformerBlock& block = *(*s.blocks)[static_cast<size_t>(l)];
    const std::string p = s.prefix + std::to_string(l) + ".";
    if (options.attention) {
      points.push_back(p + (heads ? "attn.hook_result" : "hook_attn_out"));
      if (block.cross_attn)
        points.push_back(p + (heads ? "cross_attn.hook_result" : "hook_cross_attn_out"));
    }
    if (options.mlp && block.ffn) points.push_back(p + "hook_mlp_out");
  }
  return points;
}

ResidualStack decompose_residual(const nn::SequenceModel& model, const PointReader& read,
                                 const DecomposeOptions& options) {
  const DecodedStream s = stream_of(model);
  require_pre_norm(model, s, "decompose_residual");
  const int64_t end = stream_layer(s, options.layer, "decompose_residual");
  NoGradGuard no_graph;
  ResidualStack out;
  std::vector<Tensor> parts;
  const auto add = [&](std::string label, const Tensor& part) {
    out.labels.push_back(std::move(label));
    parts.push_back(as_one_part(part));
  };
  if (options.embeddings) {
    const Tensor token = read("embed.hook_token");  // [B, T, C]
    add("embed", token);
    add("pos_embed", broadcast_to(read("embed.hook_position"), token.shape()));  // [T, C]
  }
  // One attention's heads [B, T, H, C] as parts [H, B, T, C], and its output bias.
  const auto add_heads = [&](const nn::MultiHeadAttention& attention, const std::string& point,
                             int64_t l, bool cross) {
    const std::string suffix = cross ? "_cross" : "";
    const Tensor result = read(point);  // [B, T, H, C]
    const Tensor per_head = permute(result, {2, 0, 1, 3});
    for (int64_t h = 0; h < result.size(2); ++h) {
      std::string label = "L";
      label.append(std::to_string(l)).append("H").append(std::to_string(h)).append(suffix);
      out.labels.push_back(label);
    }
    parts.push_back(per_head);
    if (options.biases && attention.out_proj->bias.defined()) {
      const Shape residual{result.size(0), result.size(1), result.size(3)};
      out.labels.push_back(std::to_string(l) + suffix + "_attn_bias");
      parts.push_back(bias_part(attention.out_proj->bias, residual));
    }
  };
  for (int64_t l = 0; l < end; ++l) {
    const nn::TransformerBlock& block = *(*s.blocks)[static_cast<size_t>(l)];
    const std::string p = s.prefix + std::to_string(l) + ".";
    const std::string layer = std::to_string(l);
    if (options.attention && options.grain == ResidualGrain::Heads) {
      add_heads(*block.attn, p + "attn.hook_result", l, false);
      if (block.cross_attn) add_heads(*block.cross_attn, p + "cross_attn.hook_result", l, true);
    } else if (options.attention) {
      add(layer + "_attn_out", read(p + "hook_attn_out"));
      if (block.cross_attn) add(layer + "_cross_attn_out", read(p + "hook_cross_attn_out"));
    }
    if (options.mlp && block.ffn) add(layer + "_mlp_out", read(p + "hook_mlp_out"));
  }
  if (parts.empty()) {
    throw ConfigError("decompose_residual: these options leave no part of the stream entering " +
                      residual_point(model, options.layer));
  }
  out.stack = concat(parts, 0);  // [N, B, T, C]
  return out;
}

Tensor apply_frozen_norm(const nn::SequenceModel& model, const Tensor& stack,
                         const Tensor& residual, int64_t layer, bool fold_ln) {
  const DecodedStream s = stream_of(model);
  require_pre_norm(model, s, "apply_frozen_norm");
  const nn::Norm* norm = norm_before(s, stream_layer(s, layer, "apply_frozen_norm"));
  const Shape& tail = residual.shape();
  const Shape& shape = stack.shape();
  if (shape.size() < tail.size() ||
      !std::equal(tail.begin(), tail.end(), shape.end() - tail.size())) {
    throw ShapeError("apply_frozen_norm: stack " + to_string(shape) +
                     " does not end with the residual's shape " + to_string(tail) + " (B, T, C)");
  }
  if (!norm) return stack;
  NoGradGuard no_graph;
  // The scale [..., 1] of the whole residual, applied to every part alike: the norm then acts
  // on the stream as one linear map, and the normalised parts sum to the normalised stream.
  if (const auto* ln = dynamic_cast<const nn::LayerNorm*>(norm)) {
    const Tensor centred = residual - mean(residual, {-1}, true);
    const Tensor scale = sqrt(add(mean(centred * centred, {-1}, true), ln->eps));
    const Tensor out = (stack - mean(stack, {-1}, true)) / scale;
    return fold_ln ? out : out * ln->weight;
  }
  if (const auto* rms = dynamic_cast<const nn::RMSNorm*>(norm)) {
    const Tensor scale = sqrt(add(mean(residual * residual, {-1}, true), rms->eps));
    const Tensor out = stack / scale;
    return fold_ln ? out : out * rms->weight;
  }
  throw ConfigError("apply_frozen_norm: the norm '" + model.config().norm.kind +
                    "' is neither LayerNorm nor RMSNorm: its scale cannot be frozen");
}

ResidualStack normalized_parts(const nn::SequenceModel& model, const ResidualStack& parts,
                               const Tensor& residual, int64_t layer, bool fold_ln) {
  const DecodedStream s = stream_of(model);
  const int64_t at = stream_layer(s, layer, "normalized_parts");
  ResidualStack out{parts.labels, apply_frozen_norm(model, parts.stack, residual, layer, fold_ln)};
  const auto* ln = dynamic_cast<const nn::LayerNorm*>(norm_before(s, at));
  if (fold_ln || !ln || !ln->bias.defined()) return out;
  NoGradGuard no_graph;
  out.labels.push_back(at == layer_count(s) ? "ln_final_bias" : std::to_string(at) + "_ln1_bias");
  out.stack = concat({out.stack, bias_part(ln->bias, residual.shape())}, 0);
  return out;
}

Unembedding unembedding(const nn::SequenceModel& model, bool fold_ln) {
  const DecodedStream s = stream_of(model);
  NoGradGuard no_graph;
  Unembedding u;
  u.weight = transpose(s.head ? s.head->weight : s.embed->token_embedding->weight, 0, 1);  // [C, V]
  if (s.head && s.head->bias.defined()) u.bias = s.head->bias;
  if (!fold_ln || !s.ln_f) return u;
  const int64_t C = u.weight.size(0);
  const auto* ln = dynamic_cast<const nn::LayerNorm*>(s.ln_f);
  const auto* rms = dynamic_cast<const nn::RMSNorm*>(s.ln_f);
  if (!ln && !rms) {
    throw ConfigError("unembedding: the norm '" + model.config().norm.kind +
                      "' is neither LayerNorm nor RMSNorm: it cannot be folded");
  }
  const Tensor W = u.weight;
  u.weight = W * reshape(ln ? ln->weight : rms->weight, {C, 1});
  if (ln && ln->bias.defined()) {
    const Tensor folded = reshape(matmul(reshape(ln->bias, {1, C}), W), {W.size(1)});  // [V]
    u.bias = u.bias.defined() ? u.bias + folded : folded;
  }
  return u;
}

DlaRows direct_logit_attribution(const nn::SequenceModel& model, const nn::SequenceBatch& batch,
                                 const DlaOptions& options) {
  std::vector<std::string> points = decomposition_points(model, {});
  const std::string final_point = residual_point(model, -1);
  points.push_back(final_point);
  const std::set<std::string> wanted(points.begin(), points.end());
  const nn::ActivationCache cache =
      run_with_cache(model, batch,
                     nn::HookFilter([&](const std::string& name) { return wanted.count(name) > 0; },
                                    "the residual stream's parts"));
  const PointReader read = [&](const std::string& name) { return cache.at(name); };
  const Tensor residual = cache.at(final_point);  // [B, T, C]
  const ResidualStack parts =
      normalized_parts(model, decompose_residual(model, read), residual, -1, options.fold_ln);
  const Unembedding u = unembedding(model, options.fold_ln);

  const int64_t N = static_cast<int64_t>(parts.labels.size());
  const int64_t B = residual.size(0), T = residual.size(1), C = residual.size(2);
  const int64_t V = u.weight.size(1);
  const std::vector<double> stack = parts.stack.to_vector();  // [N, B, T, C]
  const std::vector<double> W = u.weight.to_vector();         // [C, V]
  const std::vector<double> b = u.bias.defined() ? u.bias.to_vector() : std::vector<double>();
  const std::vector<double> logits = cache.logits.to_vector();  // [B, T, V]
  const auto check_token = [&](int64_t token, const char* what) {
    if (token < -1 || token >= V) {
      throw ConfigError("direct_logit_attribution: " + std::string(what) + " " +
                        format_number(token) + " is not a token in [0, " + format_number(V) + ")");
    }
  };
  check_token(options.answer, "answer");
  check_token(options.versus, "versus");
  if (options.position < -1 || options.position >= T) {
    throw ConfigError("direct_logit_attribution: position " + format_number(options.position) +
                      " is not in [0, " + format_number(T) + ")");
  }
  const bool has_targets = !batch.targets.values.empty();
  const auto target = [&](int64_t row, int64_t t) {
    return has_targets ? batch.targets.values[static_cast<size_t>(row * T + t)] : nn::kIgnoreTarget;
  };

  DlaRows out;
  out.labels = parts.labels;
  if (!b.empty()) out.labels.push_back("unembed_bias");
  for (int64_t row = 0; row < B; ++row) {
    int64_t p = options.position;
    for (int64_t t = 0; p < 0 && t < T; ++t) {
      if (target(row, t) != nn::kIgnoreTarget) p = t;
    }
    if (p < 0) {
      throw ConfigError("direct_logit_attribution: row " + format_number(row) +
                        " has no target, so no answer position: give a position");
    }
    const int64_t token = options.answer >= 0 ? options.answer : target(row, p);
    if (token == nn::kIgnoreTarget) {
      throw ConfigError("direct_logit_attribution: row " + format_number(row) + " position " +
                        format_number(p) + " has no target: give the answer token");
    }
    // The direction in the norm's output whose dot product is the logit (difference).
    std::vector<double> direction(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) {
      direction[static_cast<size_t>(c)] =
          W[static_cast<size_t>(c * V + token)] -
          (options.versus >= 0 ? W[static_cast<size_t>(c * V + options.versus)] : 0.0);
    }
    for (int64_t n = 0; n < N; ++n) {
      const double* part = stack.data() + ((n * B + row) * T + p) * C;
      double dot = 0;
      for (int64_t c = 0; c < C; ++c) dot += part[c] * direction[static_cast<size_t>(c)];
      out.contributions.push_back(dot);
    }
    const auto versus = [&](const std::vector<double>& v, int64_t offset) {
      return options.versus >= 0 ? v[static_cast<size_t>(offset + options.versus)] : 0.0;
    };
    if (!b.empty()) out.contributions.push_back(b[static_cast<size_t>(token)] - versus(b, 0));
    const int64_t at = (row * T + p) * V;
    out.logits.push_back(logits[static_cast<size_t>(at + token)] - versus(logits, at));
    out.positions.push_back(p);
    out.answers.push_back(token);
  }
  return out;
}

void DlaReduction::add(const DlaRows& rows) {
  const size_t N = rows.labels.size();
  if (sums_.labels.empty()) {
    sums_.labels = rows.labels;
    sums_.mean.assign(N, 0.0);
    m2_.assign(N, 0.0);
  }
  for (size_t r = 0; r < rows.logits.size(); ++r) {
    ++sums_.rows;
    logit_sum_ += rows.logits[r];
    for (size_t n = 0; n < N; ++n) {
      const double x = rows.contributions[r * N + n];
      const double delta = x - sums_.mean[n];
      sums_.mean[n] += delta / static_cast<double>(sums_.rows);
      m2_[n] += delta * (x - sums_.mean[n]);
    }
  }
}

DlaSummary DlaReduction::summary() const {
  if (sums_.rows == 0) throw ConfigError("direct logit attribution: no rows to reduce");
  DlaSummary out = sums_;
  for (const double s : m2_) out.std.push_back(std::sqrt(s / static_cast<double>(out.rows)));
  out.logit_mean = logit_sum_ / static_cast<double>(out.rows);
  return out;
}

DlaSummary summarize_dla(const nn::SequenceModel& model, const nn::SequenceBatch& batch,
                         const DlaOptions& options, int64_t rows, int64_t batch_size) {
  const int64_t available = batch.inputs.shape.at(0);
  const int64_t R = rows < 0 ? available : rows;
  if (R < 1 || R > available || batch_size < 1) {
    throw ConfigError("summarize_dla: " + format_number(rows) + " rows is not in [1, " +
                      format_number(available) + "], the rows the data set holds");
  }
  DlaReduction reduction;
  for (int64_t begin = 0; begin < R; begin += batch_size) {
    const int64_t count = std::min(batch_size, R - begin);
    reduction.add(direct_logit_attribution(model, nn::rows_of(batch, begin, count), options));
  }
  return reduction.summary();
}

}  // namespace gradlab::interp
