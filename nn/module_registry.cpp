// The registries of norms, positional schemes, score modifiers and feed-forwards, and gradlab's
// own rows in them.
#include "nn/module_registry.h"

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/kinds.h"

namespace gradlab::nn {

template <class Factory>
void ModuleRegistry<Factory>::add(Row row) {
  if (row.name.empty()) throw ConfigError(register_call_ + ": the " + kind_ + "'s name is empty");
  if (!row.make) throw ConfigError(register_call_ + ": " + quote(row.name) + " has no factory");
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const Row& known : rows_) {
    if (known.name == row.name) {
      throw ConfigError(register_call_ + ": a " + kind_ + " named " + quote(row.name) +
                        " is registered already");
    }
  }
  rows_.push_back(std::move(row));
}

template <class Factory>
const typename ModuleRegistry<Factory>::Row& ModuleRegistry<Factory>::find(
    const std::string& name) const {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const Row& row : rows_) {
      if (row.name == name) return row;
    }
  }
  throw ConfigError(kind_ + " " + quote(name) + " is not registered in this program (registered: " +
                    names() + "); a program registers it with " + register_call_ + "(\"" + name +
                    "\", help, factory) before it builds or loads the model");
}

template <class Factory>
std::vector<typename ModuleRegistry<Factory>::Row> ModuleRegistry<Factory>::rows() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return {rows_.begin(), rows_.end()};
}

template <class Factory>
std::string ModuleRegistry<Factory>::names() const {
  std::vector<std::string> names;
  for (const Row& row : rows()) names.push_back(row.name);
  return name_list(names);
}

template class ModuleRegistry<NormFactory>;
template class ModuleRegistry<PositionsFactory>;
template class ModuleRegistry<ScoreModifierFactory>;
template class ModuleRegistry<FeedForwardFactory>;

namespace {

void add_builtin_norms(ModuleRegistry<NormFactory>& norms) {
  norms.add({kLayerNorm,
             "LayerNorm before each sublayer (--pre-norm) or after it, and before the head",
             [](int64_t dim, const ModelConfig& c) {
               return std::make_shared<LayerNorm>(dim, 1e-5, c.bias);
             }});
  norms.add({kNoNorm, "no normalisation: plain residual sums, the head reads the residual stream",
             [](int64_t, const ModelConfig&) { return std::shared_ptr<Norm>(); }});
  norms.add({kRmsNorm, "RMSNorm, x / sqrt(mean(x^2) + eps) * weight (no centring, no bias)",
             [](int64_t dim, const ModelConfig&) { return std::make_shared<RMSNorm>(dim); }});
}

void add_builtin_positions(ModuleRegistry<PositionsFactory>& positions) {
  positions.add({kLearnedPositions, "a learned table of max-len positions, added to the tokens",
                 [](const ModelConfig& c, Generator& gen) {
                   return std::make_shared<LearnedPositionalEmbedding>(c.max_len, c.d_model, gen);
                 }});
  positions.add({kSinusoidalPositions,
                 "the fixed sin/cos encoding of Vaswani et al., added to the tokens",
                 [](const ModelConfig& c, Generator&) {
                   return std::make_shared<SinusoidalPositionalEncoding>(c.max_len, c.d_model);
                 }});
  positions.add(
      {kNoPositions,
       "none: the tokens alone (positions only from causal masking or a score modifier)",
       [](const ModelConfig&, Generator&) { return std::shared_ptr<PositionalScheme>(); }});
}

void add_builtin_score_modifiers(ModuleRegistry<ScoreModifierFactory>& modifiers) {
  modifiers.add({kNoScoreModifier, "none: the scores as they are (the fused attention kernel)",
                 [](const ModelConfig&, Generator&) { return std::shared_ptr<ScoreModifier>(); }});
  modifiers.add({kAlibi, "ALiBi: head h adds -2^(-8h/H) |i - j| to query i's score of key j",
                 [](const ModelConfig& c, Generator&) {
                   return std::make_shared<AlibiBias>(c.attention.num_heads);
                 }});
}

void add_builtin_feed_forwards(ModuleRegistry<FeedForwardFactory>& feed_forwards) {
  feed_forwards.add({kMlp, "Linear C -> d-ff, the activation, Linear d-ff -> C",
                     [](const ModelConfig& c, Generator& gen) {
                       return std::make_shared<FeedForward>(c.d_model, c.feed_forward, gen, c.bias);
                     }});
}

}  // namespace

// Filled on first use (a function's static), so that a registration from another file's static
// initialiser finds gradlab's rows in place.
ModuleRegistry<NormFactory>& norm_registry() {
  static ModuleRegistry<NormFactory> norms("norm", "gradlab::nn::register_norm");
  static const bool filled = (add_builtin_norms(norms), true);
  (void)filled;
  return norms;
}

ModuleRegistry<PositionsFactory>& positions_registry() {
  static ModuleRegistry<PositionsFactory> positions("positional scheme",
                                                    "gradlab::nn::register_positions");
  static const bool filled = (add_builtin_positions(positions), true);
  (void)filled;
  return positions;
}

ModuleRegistry<ScoreModifierFactory>& score_modifier_registry() {
  static ModuleRegistry<ScoreModifierFactory> modifiers("score modifier",
                                                        "gradlab::nn::register_score_modifier");
  static const bool filled = (add_builtin_score_modifiers(modifiers), true);
  (void)filled;
  return modifiers;
}

ModuleRegistry<FeedForwardFactory>& feed_forward_registry() {
  static ModuleRegistry<FeedForwardFactory> feed_forwards("feed-forward",
                                                          "gradlab::nn::register_feed_forward");
  static const bool filled = (add_builtin_feed_forwards(feed_forwards), true);
  (void)filled;
  return feed_forwards;
}

void register_norm(const std::string& name, const std::string& help, NormFactory make) {
  norm_registry().add({name, help, std::move(make)});
}

void register_positions(const std::string& name, const std::string& help, PositionsFactory make) {
  positions_registry().add({name, help, std::move(make)});
}

void register_score_modifier(const std::string& name, const std::string& help,
                             ScoreModifierFactory make) {
  score_modifier_registry().add({name, help, std::move(make)});
}

void register_feed_forward(const std::string& name, const std::string& help,
                           FeedForwardFactory make) {
  feed_forward_registry().add({name, help, std::move(make)});
}

std::shared_ptr<Norm> make_norm(int64_t dim, const ModelConfig& config) {
  return norm_registry().find(config.norm.kind).make(dim, config);
}

std::string position_scheme_name(const EmbeddingOptions& embedding) {
  if (!embedding.learned_positions && embedding.positions == kLearnedPositions) {
    return kSinusoidalPositions;
  }
  return embedding.positions;
}

EmbeddingOptions resolved_positions(EmbeddingOptions embedding) {
  embedding.positions = position_scheme_name(embedding);
  embedding.learned_positions = embedding.positions != kSinusoidalPositions;
  return embedding;
}

std::shared_ptr<PositionalScheme> make_positions(const ModelConfig& config, Generator& gen) {
  return positions_registry().find(position_scheme_name(config.embedding)).make(config, gen);
}

std::shared_ptr<ScoreModifier> make_score_modifier(const ModelConfig& config, Generator& gen) {
  return score_modifier_registry().find(config.attention.score_modifier).make(config, gen);
}

std::shared_ptr<Sublayer> make_feed_forward(const ModelConfig& config, Generator& gen) {
  if (config.feed_forward.d_ff == 0) return nullptr;
  const std::shared_ptr<Sublayer> ffn =
      feed_forward_registry().find(config.feed_forward.kind).make(config, gen);
  if (!ffn) {
    throw ConfigError("feed-forward " + quote(config.feed_forward.kind) +
                      ": its factory returned no module");
  }
  return ffn;
}

}  // namespace gradlab::nn
