// The modules a model builds by name: its norms, its positional scheme, its attention score
// modifiers and its feed-forward sublayers. gradlab's own (norm "layer", "rmsnorm", "none";
// positions "learned", "sinusoidal", "none"; score modifier "none", "alibi"; feed-forward "mlp")
// are rows registered here like anyone else's, so that a program on the installed library adds
// its own under a name:
//
//   gradlab::nn::register_norm("scaled_tanh", "tanh(x) * weight",
//       [](int64_t dim, const gradlab::nn::ModelConfig&) {
//         return std::make_shared<ScaledTanhNorm>(dim);
//       });
//   config.norm.kind = "scaled_tanh";  // the --norm flag, the /config attribute "norm"
//
// and the built-in decoder and encoder-decoder then build it wherever they put a norm (or their
// positions, a self-attention layer, a feed-forward), with every hook point, the instruments,
// checkpoints and gradcheck. The config names each: norm.kind (--norm, /config "norm"),
// embedding.positions (--positions, "positions"), attention.score_modifier (--score-modifier,
// "score-modifier"), feed_forward.kind (--feed-forward, "feed-forward").
//
// The contract:
// - Register before a model that names the module is built or loaded (at the start of main).
//   A checkpoint records the name only: a program that loads one registers the same module
//   first, or the load throws CheckpointError naming the missing name and register_norm (or
//   register_positions, register_score_modifier, register_feed_forward).
// - Names are unique per kind and may not be empty; registering a taken name throws
//   ConfigError. Registrations last as long as the program; there is no unregistering.
// - A factory is called once per module the model holds, with the model's whole config (its
//   own options may live anywhere in it: the factory reads what it needs). It draws its
//   initial parameters from `gen` only (a norm starts from constants), so that a seed gives one
//   model. A norm, positions or score-modifier factory may return null: none (the residual
//   stream passes as it is; no positions are added; the scores stay as they are), as the rows
//   "none" do.
// - A norm maps [..., C] to [..., C] over the last axis; a feed-forward maps [B, T, C] to
//   [B, T, C]. Each must work in float32 and float64 (the gradient check runs in float64).
// - A positional scheme (nn/layers.h, PositionalScheme) is built once per model, as the
//   submodule embed.position_embedding (its parameters under that name): given a length T and a
//   first position, it returns [T, C], which the model adds to the token embeddings [B, T, C] of
//   every sequence (decoder input, encoder source, generation's new tokens at their positions);
//   that is the hook point hook_position. It may refuse positions at or past config.max_len (the
//   learned table has max_len rows; the sinusoidal encoding is precomputed as far). Position
//   information that acts inside attention is a score modifier. The two combine freely: ALiBi
//   models usually add no positions (positions "none").
// - A score modifier (nn/score_modifier.h) is built once per self-attention layer (not for
//   cross-attention), as the submodule attn.score_modifier: it maps the layer's scaled scores
//   [B, H, Tq, Tk] (queries from a first position, keys from 0) to [B, H, Tq, Tk], before the
//   masks and the softmax. A layer with a modifier takes the composed attention path (the fused
//   kernel modifies no scores); with "none" (null) it stays fused and pays nothing.
// - Every registered module joins the module gradient checks (module_checks(), `gradlab
//   gradcheck` in that program): built with unequal sizes in float64, random parameters, its
//   gradient with respect to its input and every parameter checked by central differences (a
//   positional scheme: added to random token embeddings; a score modifier: inside a
//   cross-attention with B, H, Tq, Tk and D all different).
// - Registration is thread-safe; a model built while another thread registers sees the rows
//   registered before its look-up.
#pragma once

#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "autograd/random.h"
#include "nn/layers.h"
#include "nn/model_options.h"
#include "nn/score_modifier.h"

namespace gradlab::nn {

// A norm over dim channels, or null for none. config.bias: whether the model has biases.
using NormFactory = std::function<std::shared_ptr<Norm>(int64_t dim, const ModelConfig& config)>;
// A feed-forward sublayer of width config.d_model (its hidden width config.feed_forward.d_ff
// is positive: a model with d_ff = 0 has no feed-forward sublayer and calls no factory).
using FeedForwardFactory =
    std::function<std::shared_ptr<Sublayer>(const ModelConfig& config, Generator& gen)>;
// The positional scheme of a model (null: none), over config.max_len positions of
// config.d_model channels.
using PositionsFactory =
    std::function<std::shared_ptr<PositionalScheme>(const ModelConfig& config, Generator& gen)>;
// The score modifier of one self-attention layer (null: none), of config.attention.num_heads
// heads.
using ScoreModifierFactory =
    std::function<std::shared_ptr<ScoreModifier>(const ModelConfig& config, Generator& gen)>;

template <class Factory>
struct RegisteredModule {
  std::string name;
  std::string help;  // one line: what it computes
  Factory make;
};

// The registered modules of one kind. Rows are kept in the order they were registered.
template <class Factory>
class ModuleRegistry {
 public:
  using Row = RegisteredModule<Factory>;
  // kind: "norm"; register_call: "gradlab::nn::register_norm", for the messages.
  ModuleRegistry(std::string kind, std::string register_call)
      : kind_(std::move(kind)), register_call_(std::move(register_call)) {}

  // Throws ConfigError if name is empty or taken, or make is empty.
  void add(Row row);
  // The row named name; throws ConfigError "norm 'x' is not registered in this program
  // (registered: layer, none, rmsnorm); a program registers it with
  // gradlab::nn::register_norm("x", help, factory) before it builds or loads the model".
  const Row& find(const std::string& name) const;
  // Every row, in registration order (a copy: registration may go on).
  std::vector<Row> rows() const;
  // "layer, none or rmsnorm"
  std::string names() const;

 private:
  std::string kind_, register_call_;
  mutable std::mutex mutex_;
  std::deque<Row> rows_;  // a deque keeps find()'s references valid while rows are added
};

// The registries, with gradlab's rows already in them.
ModuleRegistry<NormFactory>& norm_registry();
ModuleRegistry<PositionsFactory>& positions_registry();
ModuleRegistry<ScoreModifierFactory>& score_modifier_registry();
ModuleRegistry<FeedForwardFactory>& feed_forward_registry();

void register_norm(const std::string& name, const std::string& help, NormFactory make);
void register_positions(const std::string& name, const std::string& help, PositionsFactory make);
void register_score_modifier(const std::string& name, const std::string& help,
                             ScoreModifierFactory make);
void register_feed_forward(const std::string& name, const std::string& help,
                           FeedForwardFactory make);

// The positional scheme embedding names: embedding.positions, except that learned_positions =
// false (the older option, the /config attribute "learned-positions" of files written before
// "positions" existed) turns the default "learned" into "sinusoidal".
std::string position_scheme_name(const EmbeddingOptions& embedding);
// embedding with positions set to position_scheme_name() and learned_positions to whether that
// is not "sinusoidal": the two options agree, so that a file records the scheme under both (a
// gradlab that knows only learned-positions reads a sinusoidal model as one, and fails on the
// missing table for any other scheme instead of building the wrong one).
EmbeddingOptions resolved_positions(EmbeddingOptions embedding);

// The modules config names: its norm over dim channels (null for none), its positional scheme
// (null for none), one self-attention layer's score modifier (null for none) and its
// feed-forward (null when config.feed_forward.d_ff is 0). Throw ConfigError for a name not
// registered.
std::shared_ptr<Norm> make_norm(int64_t dim, const ModelConfig& config);
std::shared_ptr<PositionalScheme> make_positions(const ModelConfig& config, Generator& gen);
std::shared_ptr<ScoreModifier> make_score_modifier(const ModelConfig& config, Generator& gen);
std::shared_ptr<Sublayer> make_feed_forward(const ModelConfig& config, Generator& gen);

}  // namespace gradlab::nn
