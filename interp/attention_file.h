// The HDF5 file `gradlab attention` writes, read by scripts/plot_attention.py:
//   /inputs int64 [T] (what the decoder read), /answer int64 [A], /source int64 [S]
//   (encoder-decoder only), and one float32 dataset [H, Tq, Tk] per layer and attention:
//     decoder-only model:  layer_<i> (causal self-attention)
//     encoder-decoder:     encoder_layer_<i> (self-attention over the source),
//                          decoder_layer_<i> (causal self-attention over the decoder inputs),
//                          decoder_cross_layer_<i> (decoder queries over the encoder's keys)
//   each with int64 attributes query_tokens [Tq] and key_tokens [Tk] for labelling.
// docs/attention-file.md documents the layout.
//
// And the file `gradlab activations` writes (docs/hooks.md): the same /inputs, /answer and
// /source, and one float32 dataset per cached hook point, named as the point
// ("blocks.0.attn.hook_pattern", "blocks.0.attn.hook_pattern_grad"), of the point's shape without
// its batch axis of 1, with a string attribute `letters` ("[H, Tq, Tk]").
//
// And the file `gradlab lens` writes (docs/hooks.md): the same /inputs, /answer and /source,
// /targets int64 [T] (-100 where none counts), /layers strings [L + 1], and float32
// /answer_probability [L + 1, T] (NaN where no target), /top_probabilities [L + 1, T, K], with
// int64 /top_tokens [L + 1, T, K].
#pragma once

#include <string>
#include <vector>

#include "interp/head_scores.h"
#include "interp/logit_lens.h"
#include "nn/hooks.h"
#include "nn/sequence_model.h"

namespace gradlab::interp {

// Writes the maps of a batch of one sequence (each [1, H, Tq, Tk]) and its tokens. Throws
// FileError naming the file if it cannot be written.
void write_attention_file(const std::string& path, const nn::SequenceBatch& batch,
                          const std::vector<int64_t>& answer, const nn::AttentionMaps& maps);

// Writes the cache of a batch of one sequence; letters maps a point's name to its letters
// (hook_points). Throws FileError naming the file if it cannot be written.
void write_activation_file(const std::string& path, const nn::SequenceBatch& batch,
                           const std::vector<int64_t>& answer, const nn::ActivationCache& cache,
                           const std::vector<nn::HookPointInfo>& points);

// What `gradlab patch` found (docs/hooks.md): per row (a point, or one head of it) the
// normalised logit difference of the corrupted run with that part patched from the clean run, at
// every position (one value per row without --per-position).
struct PatchingResults {
  nn::SequenceBatch clean, corrupt;
  std::vector<int64_t> clean_answer, corrupt_answer;
  std::vector<std::string> rows;      // "blocks.0.hook_resid_pre", "blocks.1.attn.hook_z head 2"
  std::vector<std::string> row_axes;  // the position axis of each row: "T", "S", or "" (whole)
  std::vector<std::vector<double>> scores;              // [rows][positions]
  double clean_difference = 0, corrupt_difference = 0;  // the metric's 1 and 0
};

// Writes /clean_inputs, /corrupt_inputs [T] (and /clean_source, /corrupt_source [S]),
// /clean_answer, /corrupt_answer, /rows (strings), /scores float64 [R, P] (P the longest row; NaN
// past a row's end) and the attributes clean_logit_difference and corrupt_logit_difference.
// Throws FileError naming the file if it cannot be written.
void write_patching_file(const std::string& path, const PatchingResults& results);
// Writes the scores of head_scores(model, options), options.length being the n they were
// measured with (head_score_length). Throws ShapeError when the points' head counts differ (the
// datasets are [L, H]), FileError naming the file if it cannot be written.
void write_head_scores_file(const std::string& path, const std::vector<LayerHeadScores>& scores,
                            const HeadScoreOptions& options);
// Writes the logit lens of a batch of one sequence. Throws FileError naming the file if it
// cannot be written.
void write_lens_file(const std::string& path, const nn::SequenceBatch& batch,
                     const std::vector<int64_t>& answer, const LensProbabilities& lens);

}  // namespace gradlab::interp
