// Whole models for the toy tasks: a decoder-only language model and an encoder-decoder model.
// Token and position embeddings are summed (no sqrt(C) scaling).
#pragma once

#include <memory>
#include <vector>

#include "nn/transformer.h"

namespace gradlab::nn {

struct ModelConfig {
  int64_t vocab_size = 12;
  int64_t max_len = 21;      // positions the position table covers
  int64_t d_model = 64;      // C
  int64_t num_heads = 4;     // H
  int64_t num_kv_heads = 0;  // 0 means num_heads
  int64_t num_layers = 2;    // blocks (seq2seq: in the encoder and in the decoder each)
  int64_t d_ff = 256;
  double dropout = 0.0;
  bool pre_norm = true;
  bool learned_positions = true;  // false: sinusoidal encoding
  uint64_t seed = 0;              // initialisation
};

// Shared embedding front end: token embedding plus positions, [B, T] -> [B, T, C].
class TokenAndPosition : public Module {
 public:
  TokenAndPosition(const ModelConfig& config, Generator& gen);
  Tensor forward(const Indices& tokens, DType dtype) const;
  std::shared_ptr<Embedding> token_embedding;
  std::shared_ptr<LearnedPositionalEmbedding> position_embedding;  // null when sinusoidal
  std::shared_ptr<SinusoidalPositionalEncoding> sinusoidal;        // null when learned
};

// Token + position embedding, N causal pre-LN blocks, final LayerNorm, linear head (not tied).
class DecoderLM : public Module {
 public:
  explicit DecoderLM(const ModelConfig& config);
  // tokens [B, T] -> logits [B, T, V]. With attention, stores each layer's weights [B, H, T, T].
  Tensor forward(const Indices& tokens, std::vector<Tensor>* attention = nullptr) const;

  const ModelConfig& config() const { return config_; }
  std::shared_ptr<Generator> dropout_gen;  // the one generator behind every dropout mask
  std::shared_ptr<TokenAndPosition> embed;
  std::vector<std::shared_ptr<TransformerBlock>> blocks;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> head;

 private:
  ModelConfig config_;
};

// Encoder (self-attention blocks over the source) and decoder (causal self-attention, then
// cross-attention over the encoder output), sharing the token and position embedding.
class EncoderDecoder : public Module {
 public:
  explicit EncoderDecoder(const ModelConfig& config);
  // source [B, S], target_in [B, T] (teacher forcing) -> logits [B, T, V].
  Tensor forward(const Indices& source, const Indices& target_in,
                 std::vector<Tensor>* attention = nullptr) const;
  Tensor encode(const Indices& source, std::vector<Tensor>* attention = nullptr) const;
  Tensor decode(const Tensor& memory, const Indices& target_in,
                std::vector<Tensor>* attention = nullptr) const;

  const ModelConfig& config() const { return config_; }
  std::shared_ptr<Generator> dropout_gen;
  std::shared_ptr<TokenAndPosition> embed;
  std::vector<std::shared_ptr<TransformerBlock>> encoder_blocks, decoder_blocks;
  std::shared_ptr<LayerNorm> encoder_ln, ln_f;
  std::shared_ptr<Linear> head;

 private:
  ModelConfig config_;
};

}  // namespace gradlab::nn
