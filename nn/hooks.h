// Hook points: the named places of a forward pass where an activation passes, through which a
// researcher reads it (run_with_cache) or replaces it (run_with_hooks), in the spirit of
// TransformerLens. A point is named by its module's path and a suffix,
// "blocks.0.attn.hook_pattern"; docs/hooks.md lists every point of both models with its shape.
//
// A module marks its points with hook_point(*this, "hook_z", z), the suffix a row's. Outside
// run_with_hooks and run_with_cache (in the training loop) that is one thread-local read and the
// activation goes on as it is: nothing is recorded and every number is what it is without hooks.
// Hooks run on the calling thread, for the forward passes inside one call, in the model's current
// mode (the command line runs models in evaluation mode, so that no dropout mask differs between
// runs).
//
// Every point is a row of nn/hook_points.h. The fused attention kernel keeps no q, k, v,
// scores, pattern or z: an attention layer one of whose own composed-only points is hooked or
// cached takes the composed path (the tutorial's steps), which computes the same values; a layer
// with no such point hooked stays fused.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/tensor.h"
#include "nn/hook_points.h"
#include "nn/module.h"

namespace gradlab::nn {

class SequenceModel;
struct SequenceBatch;
class HookSession;

// Which points a hook or a cache reads: an exact name, a glob ('*' matches any run of
// characters, dots included, '?' one character: "blocks.*.attn.hook_pattern", "*hook_z"), or a
// predicate with a description for errors.
class HookFilter {
 public:
  HookFilter(std::string pattern);  // NOLINT: a name or glob reads as a filter
  HookFilter(const char* pattern);  // NOLINT
  HookFilter(std::function<bool(const std::string& name)> predicate, std::string description);
  // Every point ("*").
  static HookFilter all();

  bool matches(const std::string& name) const;
  // The pattern, or the predicate's description.
  const std::string& description() const { return description_; }
  bool is_pattern() const { return !predicate_; }

 private:
  std::string description_;
  std::function<bool(const std::string&)> predicate_;  // empty for a pattern
};

// Forward: receives a point's activation and name; returns its replacement (same shape and
// dtype), or an undefined Tensor to leave it. A replacement computed from the activation by ops
// stays in the autograd graph, so that a patched run can be backpropagated.
// Backward: receives the gradient of the loss with respect to the point's activation, a tensor of
// its own (editing it changes no other gradient), when backward() reaches the point; returns its
// replacement (same shape and dtype), which flows on to what produced the activation, or an
// undefined Tensor to pass the gradient on as it now is (edited in place or not).
using HookFunction = std::function<Tensor(const Tensor& value, const std::string& name)>;

enum class HookDirection { Forward, Backward };

// A backward hook is attached by the forward pass as an identity node after its point, so it
// needs grad mode, fires whenever a backward pass reaches the point (after run_with_hooks has
// returned: the caller's backward of its loss), and stays in that pass's graph alone.
struct Hook {
  HookFilter filter;
  HookFunction function;
  HookDirection direction = HookDirection::Forward;
};

// One point of a model: its name, its shape in the tutorial's letters (in the encoder T is S; in
// cross-attention Tk is S) and its shape for the sequence it was listed with.
struct HookPointInfo {
  std::string name;
  std::string letters;  // "[B, H, Tq, Tk]"
  Shape shape;          // B = 1
};

// The points of model, in the order a forward pass meets them, listed by a forward pass without
// a graph over the first sequence of batch (every optional point included: hook_result).
std::vector<HookPointInfo> hook_points(const SequenceModel& model, const SequenceBatch& batch);

// The names of the points filter matches. Throws ConfigError "<caller>: '<filter>' matches no
// hook point of this model; closest: <three names>" when there is none.
std::vector<std::string> matching_points(const std::vector<HookPointInfo>& points,
                                         const HookFilter& filter, const std::string& caller);

// One filter matching any of patterns (names or globs), each of which must match a point: throws
// as matching_points (naming the pattern and the closest points) for one that matches none.
HookFilter any_of_points(const std::vector<HookPointInfo>& points,
                         const std::vector<std::string>& patterns, const std::string& caller);

// Logits [B, T, V] of model on batch with the forward hooks applied, in their order, at every
// point their filters match, and the backward hooks attached (at one point, the first listed
// fires first). The filters are checked after the pass, against the points it met (no pass to
// list them): ConfigError for a filter that matches no point of the model (naming the closest
// points), and for backward hooks without grad mode; ShapeError for a replacement of another
// shape or dtype.
Tensor run_with_hooks(const SequenceModel& model, const SequenceBatch& batch,
                      const std::vector<Hook>& hooks);

// The hooks applied to every forward pass of model on the calling thread while the scope lives:
// for code that runs the model itself, such as an evaluation over a held-out set
// (train::Trainer::evaluate) with a head knocked out. Throws as run_with_hooks for a filter that
// matches none of the model's points (listed by a pass over one position of batch: the names
// do not depend on the lengths). Scopes nest, and an enclosing scope's forward hooks
// apply inside any inner scope, run_with_hooks or run_with_cache too, before the inner ones: an
// intervention stays in place while an instrument runs the model.
class HookScope {
 public:
  HookScope(const SequenceModel& model, const SequenceBatch& batch, std::vector<Hook> hooks);
  ~HookScope();
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;

 private:
  std::vector<Hook> hooks_;
  std::unique_ptr<HookSession> session_;
};

struct CacheOptions {
  // Also cache "<name>_grad": the gradient of sequence_loss(logits, batch) with respect to each
  // cached activation, as it flows on after the backward hooks (parameter gradients accumulate
  // as in any backward pass). The cache reads it by a backward hook of its own.
  bool gradients = false;
  // Without gradients and logits, the forward pass stops after the last cached point (the points
  // are then listed by a pass over one position, to know the last).
  bool logits = true;
  // Forward hooks apply before the cache reads a point, so that the cache holds what the model
  // then used; backward hooks (with gradients only) before it reads the gradient.
  std::vector<Hook> hooks = {};
};

// Activations by point name, each a tensor of its own (no graph).
class ActivationCache {
 public:
  bool contains(const std::string& name) const { return values_.count(name) > 0; }
  // Throws ConfigError naming the closest cached names when name is not cached.
  const Tensor& at(const std::string& name) const;
  // The cached names, in the order the forward pass met them (gradients after the activations).
  const std::vector<std::string>& names() const { return names_; }
  // Bytes the cached tensors hold.
  int64_t bytes() const;

  Tensor logits;  // [B, T, V]; undefined when the forward pass stopped early
  Tensor loss;    // with gradients: model.loss(batch)

 private:
  friend ActivationCache run_with_cache(const SequenceModel&, const SequenceBatch&,
                                        const HookFilter&, const CacheOptions&);
  friend class HookSession;
  void insert(const std::string& name, const Tensor& value);
  std::map<std::string, Tensor> values_;
  std::vector<std::string> names_;
};

// The activations at every point filter matches, for model on batch. Throws as run_with_hooks.
ActivationCache run_with_cache(const SequenceModel& model, const SequenceBatch& batch,
                               const HookFilter& filter, const CacheOptions& options = {});

// activation with the slice `head` of axis `axis` set to zero, by a product with a constant mask
// (so that the result stays in the graph): head ablation at hook_z, hook_q ([B, T, H, D]: axis
// 2), hook_k, hook_v ([B, T, KV, D]) or hook_pattern ([B, H, Tq, Tk]: axis 1).
Tensor zero_head(const Tensor& activation, int64_t axis, int64_t head);

// What a module calls at each of its points: the activation, or what the hooks replaced it with
// (the cache records it too).
Tensor hook_point(const Module& owner, const char* point, const Tensor& activation);
// Whether a hook or the cache reads owner's point: for points that cost work only when read
// (hook_result) and for choosing the composed attention path.
bool hook_wanted(const Module& owner, const char* point);
// Whether a hook (forward or backward) matches owner's point, or the cache reads its gradient:
// for points whose value costs a path of its own only when something may change it or read its
// gradient (a block's split inputs); a cache of values alone records a copy of what passes.
bool hook_replaced(const Module& owner, const char* point);

// Whether hooks or a cache apply to forward passes on the calling thread (run_with_hooks,
// run_with_cache, a HookScope): a cheap check. They apply on that thread alone, so code that
// would run a forward pass on other threads runs it on this one while this is true.
bool hooks_running();

}  // namespace gradlab::nn
