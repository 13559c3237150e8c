// The HDF5 file `gradlab attention` writes, read by scripts/plot_attention.py
// (docs/attention-file.md documents it):
//   /inputs int64 [T] (what the decoder read), /answer int64 [A], /source int64 [S]
//   (encoder-decoder only), and one float32 dataset [H, Tq, Tk] per layer and attention:
//     decoder-only model:  layer_<i> (causal self-attention)
//     encoder-decoder:     encoder_layer_<i> (self-attention over the source),
//                          decoder_layer_<i> (causal self-attention over the decoder inputs),
//                          decoder_cross_layer_<i> (decoder queries over the encoder's keys)
//   each with int64 attributes query_tokens [Tq] and key_tokens [Tk] for labelling.
#pragma once

#include <string>
#include <vector>

#include "nn/sequence_model.h"

namespace gradlab::interp {

// Writes the maps of a batch of one sequence (each [1, H, Tq, Tk]) and its tokens. Throws
// FileError naming the file if it cannot be written.
void write_attention_file(const std::string& path, const nn::SequenceBatch& batch,
                          const std::vector<int64_t>& answer, const nn::AttentionMaps& maps);

}  // namespace gradlab::interp
