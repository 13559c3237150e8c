// The options of the built-in models, one small struct per part (embedding, attention, norm,
// feed-forward, block) nested in ModelConfig and passed whole to the part that reads them: a
// new option is its field here, its row in train/config.cpp's table, and its use.
#pragma once

#include <cstdint>
#include <string>

#include "nn/initialisation.h"

namespace gradlab::nn {

// The names of the built-in rows (nn/module_registry.h), for code that picks one: the defaults
// are the options'.
inline constexpr const char* kLayerNorm = "layer";
inline constexpr const char* kRmsNorm = "rmsnorm";
inline constexpr const char* kNoNorm = "none";
inline constexpr const char* kMlp = "mlp";
inline constexpr const char* kLearnedPositions = "learned";
inline constexpr const char* kSinusoidalPositions = "sinusoidal";
inline constexpr const char* kNoPositions = "none";
inline constexpr const char* kNoScoreModifier = "none";
inline constexpr const char* kAlibi = "alibi";
inline constexpr const char* kGelu = "gelu";
inline constexpr const char* kRelu = "relu";

struct EmbeddingOptions {
  // A registered positional scheme (nn/module_registry.h). The older option learned_positions
  // turns the default, "learned", into "sinusoidal" when false; position_scheme_name() gives the
  // scheme a model builds.
  std::string positions = kLearnedPositions;
  bool learned_positions = true;
  bool tie_embeddings = false;  // the output head is the token embedding matrix (no bias)
};

struct AttentionOptions {
  int64_t num_heads = 4;     // H; C must be divisible by H
  int64_t num_kv_heads = 0;  // KV; 0 means H
  // A registered score modifier (nn/module_registry.h), one in every self-attention layer.
  std::string score_modifier = kNoScoreModifier;
};

struct NormOptions {
  std::string kind = kLayerNorm;  // a registered norm (nn/module_registry.h)
  bool final = true;              // a norm before the head (and after the encoder); false: none
};

struct FeedForwardOptions {
  std::string kind = kMlp;         // a registered feed-forward (nn/module_registry.h)
  int64_t d_ff = 256;              // F; 0: attention-only blocks (no feed-forward sublayer)
  std::string activation = kGelu;  // mlp: a row of activation_kinds() (nn/layers.h)
};

struct BlockOptions {
  bool pre_norm = true;  // false: post-norm, the norm after each residual sum
};

struct ModelConfig {
  int64_t vocab_size = 12;
  int64_t max_len = 21;    // positions the position table covers
  int64_t d_model = 64;    // C
  int64_t num_layers = 2;  // blocks (encoder-decoder: in the encoder and in the decoder each)
  double dropout = 0.0;    // on attention weights and after each sublayer
  bool bias = true;        // biases in every Linear and norm
  std::string init = kDefaultInit;  // a row of init_kinds() (nn/initialisation.h)
  uint64_t seed = 0;                // initialisation; dropout masks draw from seed + 1
  EmbeddingOptions embedding{};
  AttentionOptions attention{};
  NormOptions norm{};
  FeedForwardOptions feed_forward{};
  BlockOptions block{};
};

}  // namespace gradlab::nn
