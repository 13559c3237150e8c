// The HDF5 file `gradlab attention` writes, read by scripts/plot_attention.py:
//   /inputs int64 [T] (what the decoder read), /answer int64 [A], /source int64 [S] (seq2seq)
//   one float32 dataset [H, Tq, Tk] per layer: "layer_<i>" for the decoder-only model,
//   "encoder_layer_<i>" and "decoder_layer_<i>" (self-attention) for the encoder-decoder,
//   each with int64 attributes query_tokens [Tq] and key_tokens [Tk] for labelling.
#pragma once

#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace gradlab::train {

struct AttentionTokens {
  std::vector<int64_t> source;  // empty for the decoder-only model
  std::vector<int64_t> inputs;
  std::vector<int64_t> answer;
};

// weights: per layer [1, H, Tq, Tk], encoder layers first for the encoder-decoder (which has
// num_layers of each). Throws CheckpointError naming the file if it cannot be written.
void write_attention_file(const std::string& path, const AttentionTokens& tokens,
                          const std::vector<Tensor>& weights, int64_t num_layers);

}  // namespace gradlab::train
