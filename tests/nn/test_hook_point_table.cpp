// The hook point table (nn/hook_points.h) against what fires: every row on both attention paths
// of both models, with grouped K/V heads, and docs/hooks.md's list against the table.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "nn/hook_points.h"
#include "nn/hooks.h"
#include "nn/models.h"

namespace gradlab::nn {
namespace test_hook_point_table {

// H = 4 query heads over KV = 2 K/V heads; every axis size differs (C = 12, D = 3, F = 20).
std::shared_ptr<SequenceModel> grouped_model(const std::string& kind) {
  std::shared_ptr<SequenceModel> model =
      make_sequence_model(kind, {.vocab_size = 7,
                                 .max_len = 9,
                                 .d_model = 12,
                                 .num_layers = 2,
                                 .seed = 5,
                                 .attention = {.num_heads = 4, .num_kv_heads = 2},
                                 .feed_forward = {.d_ff = 20}});
  model->to(DType::Float64);
  model->eval();
  return model;
}

// Two samples with prompts of 2 tokens, a separator and 3 answer tokens.
SequenceBatch batch_for(const SequenceModel& model) {
  return model.make_batch(Indices({2, 6}, {1, 2, 0, 1, 2, 3, 4, 5, 0, 4, 5, 6}), 2);
}

bool has_suffix(const std::string& name, const std::string& suffix) {
  return name == suffix || name.ends_with("." + suffix);
}

// The value each point of the row reached hooks with, by name; with_every_pattern also hooks
// every attention layer's hook_pattern, which moves every layer to the composed path.
std::map<std::string, Tensor> fired(const SequenceModel& model, const SequenceBatch& batch,
                                    const HookPointRow& row, bool with_every_pattern) {
  std::map<std::string, Tensor> values;
  const std::string suffix = row.suffix;
  std::vector<Hook> hooks{
      {HookFilter([suffix](const std::string& n) { return has_suffix(n, suffix); }, suffix),
       [&](const Tensor& activation, const std::string& name) {
         values.emplace(name, activation.detach());
         return Tensor();
       }}};
  if (with_every_pattern) {
    hooks.push_back({"*hook_pattern", [](const Tensor&, const std::string&) { return Tensor(); }});
  }
  run_with_hooks(model, batch, hooks);
  return values;
}

// Equal to float64 rounding, -inf (a masked score) where the other is -inf.
void expect_same(const Tensor& fused, const Tensor& composed, const std::string& name) {
  ASSERT_EQ(fused.shape(), composed.shape()) << name;
  const std::vector<double> a = fused.to_vector(), b = composed.to_vector();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(a[i]) || std::isinf(b[i])) {
      EXPECT_EQ(a[i], b[i]) << name << " at flat index " << i;
    } else {
      EXPECT_NEAR(a[i], b[i], 1e-12) << name << " at flat index " << i;
    }
  }
}

TEST(HookPointTable, EveryRowFiresOnBothAttentionPathsWithTheSameValues) {
  std::set<std::string> rows_fired;
  for (const char* kind : {"decoder", "seq2seq"}) {
    const auto model = grouped_model(kind);
    const SequenceBatch batch = batch_for(*model);
    const std::vector<HookPointInfo> listed = hook_points(*model, batch);
    for (const HookPointRow& row : hook_point_table()) {
      std::set<std::string> want;
      for (const HookPointInfo& point : listed) {
        if (has_suffix(point.name, row.suffix)) want.insert(point.name);
      }
      if (want.empty()) continue;  // a point of the other model (the source's, cross-attention)
      // Asked alone, a point leaves the attention layers fused unless its row says otherwise.
      const std::map<std::string, Tensor> as_asked = fired(*model, batch, row, false);
      const std::map<std::string, Tensor> composed = fired(*model, batch, row, true);
      for (const std::string& name : want) {
        ASSERT_TRUE(as_asked.count(name)) << kind << ": " << name << " did not fire as asked";
        ASSERT_TRUE(composed.count(name)) << kind << ": " << name << " did not fire composed";
        expect_same(as_asked.at(name), composed.at(name), std::string(kind) + ": " + name);
      }
      EXPECT_EQ(as_asked.size(), want.size()) << kind << ": " << row.suffix;
      rows_fired.insert(row.suffix);
    }
  }
  for (const HookPointRow& row : hook_point_table()) {
    EXPECT_TRUE(rows_fired.count(row.suffix)) << row.suffix << " fires in neither model";
  }
}

TEST(HookPointTable, ListsEachPointWithItsRowsLetters) {
  const auto model = grouped_model("seq2seq");
  for (const HookPointInfo& point : hook_points(*model, batch_for(*model))) {
    const std::string suffix = point.name.substr(point.name.rfind('.') + 1);
    EXPECT_EQ(point.letters, hook_point_row(suffix).letters) << point.name;
  }
  EXPECT_THROW(hook_point_row("hook_nowhere"), std::logic_error);
}

// "| `hook_q` | MultiHeadAttention | [B, Tq, H, D] | composed | ..." -> its first four cells.
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::stringstream in(line.substr(1));
  for (std::string cell; cells.size() < 4 && std::getline(in, cell, '|');) {
    const size_t begin = cell.find_first_not_of(" `");
    const size_t end = cell.find_last_not_of(" `");
    cells.push_back(begin == std::string::npos ? "" : cell.substr(begin, end - begin + 1));
  }
  return cells;
}

TEST(HookPointTable, DocsListTheTableRowForRow) {
  std::ifstream docs(std::string(GRADLAB_TEST_FIXTURES_DIR) + "/../../docs/hooks.md");
  ASSERT_TRUE(docs) << "docs/hooks.md not found";
  std::vector<std::vector<std::string>> listed;
  for (std::string line; std::getline(docs, line);) {
    if (line.starts_with("| `hook_")) listed.push_back(cells_of(line));
  }
  std::vector<std::vector<std::string>> table;
  for (const HookPointRow& row : hook_point_table()) {
    table.push_back({row.suffix, row.owner, row.letters, row.composed_only ? "composed" : ""});
  }
  EXPECT_EQ(listed, table);
}

}  // namespace test_hook_point_table
}  // namespace gradlab::nn
