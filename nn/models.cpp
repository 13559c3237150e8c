// The decoder-only and encoder-decoder models.
#include "nn/models.h"

#include "autograd/ops.h"

namespace gradlab::nn {
namespace {

BlockConfig block_config(const ModelConfig& c, bool cross_attention) {
  return {.attention = {.d_model = c.d_model,
                        .num_heads = c.num_heads,
                        .num_kv_heads = c.num_kv_heads,
                        .bias = true,
                        .dropout = c.dropout},
          .d_ff = c.d_ff,
          .pre_norm = c.pre_norm,
          .cross_attention = cross_attention,
          .dropout = c.dropout};
}

void check_tokens(const char* model, const Indices& tokens) {
  if (tokens.shape.size() != 2) {
    throw ShapeError(std::string(model) + ": tokens must be [B, T], got " +
                     to_string(tokens.shape));
  }
}

// Runs x through blocks, collecting each block's self-attention weights when asked.
Tensor run_blocks(const std::vector<std::shared_ptr<TransformerBlock>>& blocks, Tensor x,
                  const AttentionMasks& masks, const Tensor& memory,
                  std::vector<Tensor>* attention) {
  for (const auto& block : blocks) {
    Tensor weights;
    x = block->forward(x, masks, memory, {}, attention ? &weights : nullptr);
    if (attention) attention->push_back(weights);
  }
  return x;
}

}  // namespace

TokenAndPosition::TokenAndPosition(const ModelConfig& config, Generator& gen) {
  token_embedding = register_module(
      "token_embedding", std::make_shared<Embedding>(config.vocab_size, config.d_model, gen));
  if (config.learned_positions) {
    position_embedding = register_module(
        "position_embedding",
        std::make_shared<LearnedPositionalEmbedding>(config.max_len, config.d_model, gen));
  } else {
    sinusoidal = std::make_shared<SinusoidalPositionalEncoding>(config.max_len, config.d_model);
  }
}

Tensor TokenAndPosition::forward(const Indices& tokens, DType dtype) const {
  const int64_t length = tokens.shape.back();
  const Tensor positions =
      position_embedding ? position_embedding->forward(length) : sinusoidal->forward(length, dtype);
  return token_embedding->forward(tokens) + positions;  // [B, T, C] + [T, C]
}

DecoderLM::DecoderLM(const ModelConfig& config)
    : dropout_gen(std::make_shared<Generator>(config.seed + 1)), config_(config) {
  Generator gen(config.seed);
  embed = register_module("embed", std::make_shared<TokenAndPosition>(config, gen));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    blocks.push_back(register_module(
        "blocks." + std::to_string(i),
        std::make_shared<TransformerBlock>(block_config(config, false), gen, dropout_gen)));
  }
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(config.d_model));
  head = register_module("head", std::make_shared<Linear>(config.d_model, config.vocab_size, gen));
}

Tensor DecoderLM::forward(const Indices& tokens, std::vector<Tensor>* attention) const {
  check_tokens("DecoderLM", tokens);
  AttentionMasks causal;
  causal.causal = true;
  const Tensor x = embed->forward(tokens, head->weight.dtype());                      // [B, T, C]
  return head->forward(ln_f->forward(run_blocks(blocks, x, causal, {}, attention)));  // [B, T, V]
}

EncoderDecoder::EncoderDecoder(const ModelConfig& config)
    : dropout_gen(std::make_shared<Generator>(config.seed + 1)), config_(config) {
  Generator gen(config.seed);
  embed = register_module("embed", std::make_shared<TokenAndPosition>(config, gen));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    encoder_blocks.push_back(register_module(
        "encoder." + std::to_string(i),
        std::make_shared<TransformerBlock>(block_config(config, false), gen, dropout_gen)));
  }
  encoder_ln = register_module("encoder_ln", std::make_shared<LayerNorm>(config.d_model));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    decoder_blocks.push_back(register_module(
        "decoder." + std::to_string(i),
        std::make_shared<TransformerBlock>(block_config(config, true), gen, dropout_gen)));
  }
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(config.d_model));
  head = register_module("head", std::make_shared<Linear>(config.d_model, config.vocab_size, gen));
}

Tensor EncoderDecoder::encode(const Indices& source, std::vector<Tensor>* attention) const {
  check_tokens("EncoderDecoder", source);
  const Tensor x = embed->forward(source, head->weight.dtype());
  return encoder_ln->forward(run_blocks(encoder_blocks, x, {}, {}, attention));  // [B, S, C]
}

Tensor EncoderDecoder::decode(const Tensor& memory, const Indices& target_in,
                              std::vector<Tensor>* attention) const {
  check_tokens("EncoderDecoder", target_in);
  AttentionMasks causal;
  causal.causal = true;
  const Tensor y = embed->forward(target_in, head->weight.dtype());
  return head->forward(ln_f->forward(run_blocks(decoder_blocks, y, causal, memory, attention)));
}

Tensor EncoderDecoder::forward(const Indices& source, const Indices& target_in,
                               std::vector<Tensor>* attention) const {
  return decode(encode(source, attention), target_in, attention);
}

}  // namespace gradlab::nn
