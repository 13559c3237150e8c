// The decoder-only and encoder-decoder models.
#include "nn/models.h"

#include <cmath>

#include "autograd/format.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/hooks.h"
#include "nn/initialisation.h"
#include "nn/module_registry.h"

namespace gradlab::nn {
namespace {

// The norm before the head (and after the encoder), unless the config leaves it out.
std::shared_ptr<Norm> final_norm(const ModelConfig& config) {
  return config.norm.final ? make_norm(config.d_model, config) : nullptr;
}

void check_tokens(const char* model, const Indices& tokens) {
  if (tokens.shape.size() != 2) {
    throw ShapeError(std::string(model) + ": tokens must be [B, T], got " +
                     to_string(tokens.shape));
  }
}

// The logits [B, T, V] of residual [B, T, C]: ln_f (when the model has one), then the head's own
// Linear, or with tied embeddings the token embedding matrix itself (logits = h E^T, no bias).
// Both models' unembed.
Tensor ln_f_and_head(const Tensor& residual, const Norm* ln_f, const std::shared_ptr<Linear>& head,
                     const Embedding& tokens) {
  const Tensor h = ln_f ? ln_f->forward(residual) : residual;
  return head ? head->forward(h) : linear(h, tokens.weight, Tensor());
}

// Runs x through blocks, collecting each block's self- and cross-attention weights when asked.
Tensor run_blocks(const std::vector<std::shared_ptr<TransformerBlock>>& blocks, Tensor x,
                  const AttentionMasks& masks, const Tensor& memory,
                  std::vector<Tensor>* self_weights, std::vector<Tensor>* cross_weights) {
  for (const auto& block : blocks) {
    Tensor self, cross;
    x = block->forward(x, masks, memory, {}, self_weights ? &self : nullptr,
                       cross_weights ? &cross : nullptr);
    if (self_weights) self_weights->push_back(self);
    if (cross_weights) cross_weights->push_back(cross);
  }
  return x;
}

// Columns [begin, end) of every row of samples [B, L].
Indices columns(const Indices& samples, int64_t begin, int64_t end) {
  const int64_t rows = samples.shape[0], length = samples.shape[1];
  std::vector<int64_t> values;
  values.reserve(static_cast<size_t>(rows * (end - begin)));
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = samples.values.begin() + r * length;
    values.insert(values.end(), row + begin, row + end);
  }
  return Indices({rows, end - begin}, std::move(values));
}

void check_samples(const Indices& samples, int64_t prompt_length) {
  if (samples.shape.size() != 2 || prompt_length < 0 || samples.shape[1] < prompt_length + 2) {
    throw ShapeError("SequenceModel: samples " + to_string(samples.shape) +
                     " are not [B, P + 1 + A] with P = " + std::to_string(prompt_length) +
                     " and A >= 1");
  }
}

}  // namespace

SequenceBatch decoder_batch(const Indices& samples, int64_t prompt_length) {
  check_samples(samples, prompt_length);
  const int64_t length = samples.shape[1];
  SequenceBatch batch{{}, columns(samples, 0, length - 1), columns(samples, 1, length)};
  // Position t predicts token t + 1; positions before the separator predict the prompt.
  for (size_t i = 0; i < batch.targets.values.size(); ++i) {
    if (static_cast<int64_t>(i) % (length - 1) < prompt_length) {
      batch.targets.values[i] = kIgnoreTarget;
    }
  }
  return batch;
}

SequenceBatch encoder_decoder_batch(const Indices& samples, int64_t prompt_length) {
  check_samples(samples, prompt_length);
  const int64_t length = samples.shape[1];
  return {columns(samples, 0, prompt_length), columns(samples, prompt_length, length - 1),
          columns(samples, prompt_length + 1, length)};
}

TokenAndPosition::TokenAndPosition(const ModelConfig& config, Generator& gen) {
  token_embedding = register_module(
      "token_embedding", std::make_shared<Embedding>(config.vocab_size, config.d_model, gen));
  positions = register_module("position_embedding", make_positions(config, gen));
}

Tensor TokenAndPosition::forward(const Indices& tokens, DType dtype, int64_t first,
                                 bool source) const {
  const int64_t length = tokens.shape.back();
  const Tensor token = hook_point(*this, source ? "hook_source_token" : "hook_token",
                                  token_embedding->forward(tokens));  // [B, T, C]
  if (!positions) return token;
  const Tensor added = hook_point(*this, source ? "hook_source_position" : "hook_position",
                                  positions->forward(length, first, dtype));  // [T, C]
  return token + added;
}

DecoderLM::DecoderLM(const ModelConfig& config) : SequenceModel(config) {
  Generator gen(config.seed);
  embed = register_module("embed", std::make_shared<TokenAndPosition>(config, gen));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    blocks.push_back(register_module("blocks." + std::to_string(i),
                                     std::make_shared<TransformerBlock>(config, gen, dropout_gen)));
  }
  ln_f = register_module("ln_f", final_norm(config));
  if (!config.embedding.tie_embeddings) {
    head = register_module(
        "head", std::make_shared<Linear>(config.d_model, config.vocab_size, gen, config.bias));
  }
  init_kind(config.init).apply(*this, config, gen);
}

Tensor DecoderLM::forward(const Indices& tokens, AttentionMaps* maps) const {
  check_tokens("DecoderLM", tokens);
  AttentionMasks causal;
  causal.causal = true;
  const Tensor x = embed->forward(tokens, embed->token_embedding->weight.dtype());  // [B, T, C]
  const Tensor h = run_blocks(blocks, x, causal, {}, maps ? &maps->decoder_self : nullptr, nullptr);
  return hook_point(*this, "hook_logits", unembed(h));  // [B, T, V]
}

Tensor DecoderLM::forward_incremental(const Indices& tokens, GenerationCache& cache) const {
  check_tokens("DecoderLM", tokens);
  const Tensor x =
      embed->forward(tokens, embed->token_embedding->weight.dtype(), cache.length);  // [B, Tn, C]
  cache.blocks.resize(blocks.size());
  Tensor h = x;
  for (size_t i = 0; i < blocks.size(); ++i) h = blocks[i]->forward_incremental(h, cache.blocks[i]);
  cache.length += tokens.shape[1];
  return unembed(h);  // [B, Tn, V]
}

Tensor DecoderLM::unembed(const Tensor& residual) const {
  return ln_f_and_head(residual, ln_f.get(), head, *embed->token_embedding);
}

Tensor DecoderLM::forward(const SequenceBatch& batch, AttentionMaps* maps) const {
  return forward(batch.inputs, maps);
}

int64_t DecoderLM::loss_from(const SequenceBatch& batch) const {
  const bool dropout_draws = is_training() && config().dropout > 0;
  const bool scores_modified = !blocks.empty() && blocks.back()->attn->score_modifier;
  if (hooks_running() || dropout_draws || scores_modified ||
      batch.targets.shape != batch.inputs.shape || batch.inputs.shape.size() != 2) {
    return 0;
  }
  // The last position alone: where more positions carry loss (a copy task's answer), the work
  // saved is less and the default runs' numbers, which the fixtures pin bit for bit, would round
  // differently.
  const int64_t last = batch.inputs.shape[1] - 1;
  return last > 0 && first_counted_position(batch.targets) == last ? last : 0;
}

Tensor DecoderLM::loss(const SequenceBatch& batch) const {
  const int64_t first = loss_from(batch);
  if (first == 0) return SequenceModel::loss(batch);
  const int64_t T = batch.inputs.shape[1];
  AttentionMasks causal;
  causal.causal = true;
  Tensor x = embed->forward(batch.inputs, embed->token_embedding->weight.dtype());  // [B, T, C]
  for (size_t i = 0; i + 1 < blocks.size(); ++i) x = blocks[i]->forward(x, causal);
  const Tensor last = blocks.empty() ? narrow(x, 1, first, T - first)
                                     : blocks.back()->forward_last_positions(x, first);
  return cross_entropy(unembed(last), columns(batch.targets, first, T), kIgnoreTarget);
}

EncoderDecoder::EncoderDecoder(const ModelConfig& config) : SequenceModel(config) {
  Generator gen(config.seed);
  embed = register_module("embed", std::make_shared<TokenAndPosition>(config, gen));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    encoder_blocks.push_back(
        register_module("encoder." + std::to_string(i),
                        std::make_shared<TransformerBlock>(config, gen, dropout_gen)));
  }
  encoder_ln = register_module("encoder_ln", final_norm(config));
  for (int64_t i = 0; i < config.num_layers; ++i) {
    decoder_blocks.push_back(
        register_module("decoder." + std::to_string(i),
                        std::make_shared<TransformerBlock>(config, gen, dropout_gen,
                                                           BlockAttention::SelfAndCross)));
  }
  ln_f = register_module("ln_f", final_norm(config));
  if (!config.embedding.tie_embeddings) {
    head = register_module(
        "head", std::make_shared<Linear>(config.d_model, config.vocab_size, gen, config.bias));
  }
  init_kind(config.init).apply(*this, config, gen);
}

Tensor EncoderDecoder::encode(const Indices& source, AttentionMaps* maps) const {
  check_tokens("EncoderDecoder", source);
  const Tensor x = embed->forward(source, embed->token_embedding->weight.dtype(), 0, true);
  const Tensor h =
      run_blocks(encoder_blocks, x, {}, {}, maps ? &maps->encoder_self : nullptr, nullptr);
  return encoder_ln ? encoder_ln->forward(h) : h;  // [B, S, C]
}

Tensor EncoderDecoder::decode(const Tensor& memory, const Indices& target_in,
                              AttentionMaps* maps) const {
  check_tokens("EncoderDecoder", target_in);
  AttentionMasks causal;
  causal.causal = true;
  const Tensor y = embed->forward(target_in, embed->token_embedding->weight.dtype());
  const Tensor h =
      run_blocks(decoder_blocks, y, causal, memory, maps ? &maps->decoder_self : nullptr,
                 maps ? &maps->decoder_cross : nullptr);
  return hook_point(*this, "hook_logits", unembed(h));  // [B, T, V]
}

Tensor EncoderDecoder::forward(const Indices& source, const Indices& target_in,
                               AttentionMaps* maps) const {
  return decode(encode(source, maps), target_in, maps);
}

Tensor EncoderDecoder::unembed(const Tensor& residual) const {
  return ln_f_and_head(residual, ln_f.get(), head, *embed->token_embedding);
}

SequenceBatch EncoderDecoder::make_batch(const Indices& samples, int64_t prompt_length) const {
  return encoder_decoder_batch(samples, prompt_length);
}

Tensor EncoderDecoder::forward(const SequenceBatch& batch, AttentionMaps* maps) const {
  return forward(batch.source, batch.inputs, maps);
}

std::vector<int64_t> EncoderDecoder::greedy_decode(const std::vector<int64_t>& prompt,
                                                   int64_t separator, int64_t answer_length) {
  NoGradGuard no_grad;
  EvalScope eval(*this);
  const Tensor memory = encode(Indices({1, static_cast<int64_t>(prompt.size())}, prompt));
  std::vector<int64_t> target{separator};
  for (int64_t i = 0; i < answer_length; ++i) {
    const int64_t length = static_cast<int64_t>(target.size());
    target.push_back(most_likely_last_token(decode(memory, Indices({1, length}, target))));
  }
  return {target.begin() + 1, target.end()};
}

}  // namespace gradlab::nn
