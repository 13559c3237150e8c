// The hook point table (docs/hooks.md, "The points", lists the same rows; a test compares them).
#include "nn/hook_points.h"

#include <stdexcept>

namespace gradlab::nn {

const std::vector<HookPointRow>& hook_point_table() {
  static const std::vector<HookPointRow> rows{
      {"hook_token", "TokenAndPosition", "[B, T, C]", false},
      {"hook_position", "TokenAndPosition", "[T, C]", false},
      {"hook_source_token", "TokenAndPosition", "[B, S, C]", false},
      {"hook_source_position", "TokenAndPosition", "[S, C]", false},
      {"hook_resid_pre", "TransformerBlock", "[B, T, C]", false},
      {"hook_attn_in", "TransformerBlock", "[B, T, H, C]", false},
      {"hook_q_input", "TransformerBlock", "[B, T, H, C]", false},
      {"hook_k_input", "TransformerBlock", "[B, T, KV, C]", false},
      {"hook_v_input", "TransformerBlock", "[B, T, KV, C]", false},
      {"hook_normalized", "LayerNorm", "[B, T, C]", false},
      {"hook_q", "MultiHeadAttention", "[B, Tq, H, D]", true},
      {"hook_k", "MultiHeadAttention", "[B, Tk, KV, D]", true},
      {"hook_v", "MultiHeadAttention", "[B, Tk, KV, D]", true},
      {"hook_scores", "MultiHeadAttention", "[B, H, Tq, Tk]", true},
      {"hook_pattern", "MultiHeadAttention", "[B, H, Tq, Tk]", true},
      {"hook_z", "MultiHeadAttention", "[B, Tq, H, D]", true},
      {"hook_result", "MultiHeadAttention", "[B, Tq, H, C]", true},
      {"hook_attn_out", "TransformerBlock", "[B, T, C]", false},
      {"hook_resid_mid", "TransformerBlock", "[B, T, C]", false},
      {"hook_cross_q_input", "TransformerBlock", "[B, T, H, C]", false},
      {"hook_cross_k_input", "TransformerBlock", "[B, S, KV, C]", false},
      {"hook_cross_v_input", "TransformerBlock", "[B, S, KV, C]", false},
      {"hook_cross_attn_out", "TransformerBlock", "[B, T, C]", false},
      {"hook_resid_mid_cross", "TransformerBlock", "[B, T, C]", false},
      {"hook_mlp_in", "TransformerBlock", "[B, T, C]", false},
      {"hook_pre", "FeedForward", "[B, T, F]", false},
      {"hook_post", "FeedForward", "[B, T, F]", false},
      {"hook_mlp_out", "TransformerBlock", "[B, T, C]", false},
      {"hook_resid_post", "TransformerBlock", "[B, T, C]", false},
      {"hook_logits", "SequenceModel", "[B, T, V]", false},
  };
  return rows;
}

const HookPointRow& hook_point_row(const std::string& suffix) {
  for (const HookPointRow& row : hook_point_table()) {
    if (suffix == row.suffix) return row;
  }
  throw std::logic_error("hook point '" + suffix +
                         "' is fired but has no row in the hook point table (nn/hook_points.cpp)");
}

}  // namespace gradlab::nn
