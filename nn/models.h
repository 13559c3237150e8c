// Whole models for the toy tasks: a decoder-only language model and an encoder-decoder model,
// both SequenceModels. Token and position embeddings are summed (no sqrt(C) scaling).
#pragma once

#include <memory>
#include <vector>

#include "nn/sequence_model.h"
#include "nn/transformer.h"

namespace gradlab::nn {

// Shared embedding front end: token embedding plus the positional scheme the config names
// (nn/module_registry.h), [B, T] -> [B, T, C].
class TokenAndPosition : public Module {
 public:
  TokenAndPosition(const ModelConfig& config, Generator& gen);
  // tokens [B, T] at positions [first, first + T) -> [B, T, C]. Hook points hook_token and
  // hook_position (none without positions), or for the encoder's source hook_source_token and
  // hook_source_position.
  Tensor forward(const Indices& tokens, DType dtype, int64_t first = 0, bool source = false) const;
  std::shared_ptr<Embedding> token_embedding;
  // The submodule "position_embedding" whatever its kind; null with positions "none".
  std::shared_ptr<PositionalScheme> positions;
};

// Token + position embedding, N causal blocks, the final norm (none with norm "none" or without
// norm.final), and the output head: a Linear, or the token embedding matrix with
// tie_embeddings.
class DecoderLM : public SequenceModel {
 public:
  explicit DecoderLM(const ModelConfig& config);
  using SequenceModel::forward;
  // tokens [B, T] -> logits [B, T, V]; with maps, each layer's weights [B, H, T, T] go to
  // maps->decoder_self.
  Tensor forward(const Indices& tokens, AttentionMaps* maps = nullptr) const;

  // The batch layout and greedy decode are SequenceModel's decoder-only defaults.
  Tensor forward(const SequenceBatch& batch, AttentionMaps* maps = nullptr) const override;
  Tensor forward_incremental(const Indices& tokens, GenerationCache& cache) const override;
  // ln_f (if any), then the head: [B, T, C] -> [B, T, V].
  Tensor unembed(const Tensor& residual) const override;
  // The loss of forward(batch), with the last block, the final norm and the head run at the
  // positions loss_from(batch) on alone (TransformerBlock::forward_last_positions): equal up to
  // rounding, since the positions before carry no loss.
  Tensor loss(const SequenceBatch& batch) const override;
  // The first position loss(batch) computes the last block at: T - 1 when the last position
  // alone carries loss (a task whose answer is one token: modular), or else 0 (every position),
  // and 0 too while a hook or cache observes the pass (it sees every position then), while
  // dropout draws masks, or when the last block's scores are modified.
  int64_t loss_from(const SequenceBatch& batch) const;

  std::shared_ptr<TokenAndPosition> embed;
  std::vector<std::shared_ptr<TransformerBlock>> blocks;
  std::shared_ptr<Norm> ln_f;    // null with norm "none" or without norm.final
  std::shared_ptr<Linear> head;  // null with tied embeddings
};

// Encoder (self-attention blocks over the source) and decoder (causal self-attention, then
// cross-attention over the encoder output), sharing the token and position embedding.
class EncoderDecoder : public SequenceModel {
 public:
  explicit EncoderDecoder(const ModelConfig& config);
  using SequenceModel::forward;
  // source [B, S], target_in [B, T] (teacher forcing) -> logits [B, T, V].
  Tensor forward(const Indices& source, const Indices& target_in,
                 AttentionMaps* maps = nullptr) const;
  // source [B, S] -> memory [B, S, C]; with maps, fills maps->encoder_self.
  Tensor encode(const Indices& source, AttentionMaps* maps = nullptr) const;
  // memory [B, S, C], target_in [B, T] -> logits [B, T, V]; with maps, fills
  // maps->decoder_self and maps->decoder_cross.
  Tensor decode(const Tensor& memory, const Indices& target_in,
                AttentionMaps* maps = nullptr) const;

  SequenceBatch make_batch(const Indices& samples, int64_t prompt_length) const override;
  Tensor forward(const SequenceBatch& batch, AttentionMaps* maps = nullptr) const override;
  std::vector<int64_t> greedy_decode(const std::vector<int64_t>& prompt, int64_t separator,
                                     int64_t answer_length) override;
  // The decoder's ln_f (if any), then the head: [B, T, C] -> [B, T, V].
  Tensor unembed(const Tensor& residual) const override;

  std::shared_ptr<TokenAndPosition> embed;
  std::vector<std::shared_ptr<TransformerBlock>> encoder_blocks, decoder_blocks;
  std::shared_ptr<Norm> encoder_ln, ln_f;  // null with norm "none" or without norm.final
  std::shared_ptr<Linear> head;            // null with tied embeddings
};

}  // namespace gradlab::nn
