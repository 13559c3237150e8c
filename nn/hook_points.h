// The one table of hook points: each row a point's suffix, the module that fires it, its shape
// in the tutorial's letters and whether the fused attention path must give way to the composed one
// for it. Point names (module path + "." + suffix), `gradlab hooks`' letters, docs/hooks.md's
// list (a test compares them) and the fused path's choice all read it: a new point is a row
// here and a hook_point call where it passes.
#pragma once

#include <string>
#include <vector>

namespace gradlab::nn {

struct HookPointRow {
  const char* suffix;   // "hook_pattern": the name after the owner's path
  const char* owner;    // the module class that fires it: "MultiHeadAttention"
  const char* letters;  // "[B, H, Tq, Tk]"; in the encoder T is S, in cross-attention Tk is S
  // The fused attention kernel keeps no such intermediate: an attention layer asked for this
  // point (hooked or cached) takes the composed path, which materialises it.
  bool composed_only;
};

// Every point, in the order a forward pass meets them.
const std::vector<HookPointRow>& hook_point_table();

// The row of suffix; std::logic_error when the table has none (a point fired without its row).
const HookPointRow& hook_point_row(const std::string& suffix);

}  // namespace gradlab::nn
