// Read access to tests/fixtures/reference.h5, the PyTorch reference values for multi-head attention
// and the pre-LayerNorm transformer block (written by scripts/make_reference.py; the layout is
// described there and in tests/fixtures/README.md).
//
// Paths are relative to the file's root and use '/' between groups, e.g.
// "mha_cross/inputs/query" or "block_pre_ln_causal/params/attn.q_proj.weight": parameter names
// contain dots and are stored as flat dataset names inside params/.
//
// Every failure (missing file, group, dataset or attribute; wrong type) throws
// std::runtime_error naming the file and the path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/indices.h"
#include "autograd/tensor.h"

namespace H5 {
class H5File;
}

namespace gradlab::testing {

class Reference {
 public:
  // Opens the file read-only.
  explicit Reference(const std::string& path);

  // The case groups at the root, in name order.
  std::vector<std::string> cases() const;

  // Scalar attributes of a case group (integer attributes: num_heads, num_kv_heads, causal,
  // self_attention, d_ff; string attribute: kind).
  int64_t attr_int(const std::string& case_name, const std::string& attr) const;
  std::string attr_string(const std::string& case_name, const std::string& attr) const;

  // Whether a dataset or group exists at the path.
  bool has(const std::string& dataset_path) const;

  // A dataset's values converted to dtype, with the dataset's shape; not requiring grad.
  Tensor tensor(const std::string& dataset_path, DType dtype) const;
  // A uint8 dataset (e.g. inputs/key_padding_mask, 1 = padding) with its shape.
  Mask mask(const std::string& dataset_path) const;

  // Names of the datasets under a group, in name order; datasets in subgroups are listed as
  // "sub/name". E.g. names("mha_self/params") = {"k_proj.bias", "k_proj.weight", ...}.
  std::vector<std::string> names(const std::string& group_path) const;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::shared_ptr<H5::H5File> file_;
};

// GRADLAB_TEST_FIXTURES_DIR "/reference.h5".
std::string reference_path();

}  // namespace gradlab::testing
