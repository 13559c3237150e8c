// The hook session: what run_with_hooks and run_with_cache set up on the calling thread for the
// duration of their forward passes, and what hook_point consults.
#include "nn/hooks.h"

#include <algorithm>
#include <unordered_map>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/hook_points.h"
#include "nn/sequence_model.h"

namespace gradlab::nn {
namespace {

// Glob match with '*' (any run, dots included) and '?' (one character), iterative with one
// backtrack point: linear in practice for point names.
bool glob_match(const std::string& pattern, const std::string& name) {
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// "a, b, c": the (at most) three names nearest to text.
std::string closest(const std::string& text, std::vector<std::string> names) {
  std::stable_sort(names.begin(), names.end(), [&](const std::string& x, const std::string& y) {
    return edit_distance(text, x) < edit_distance(text, y);
  });
  std::string out;
  for (size_t i = 0; i < std::min<size_t>(3, names.size()); ++i) out += (i ? ", " : "") + names[i];
  return out.empty() ? "(the model has no hook points)" : out;
}

// Thrown by the cache after its last point when nothing later is needed; caught by
// run_with_cache alone.
struct StopForward {};

// The first row of a [B, ...] index batch, as [1, ...].
Indices first_row(const Indices& ids) {
  if (ids.shape.empty() || ids.shape[0] == 0) return ids;
  Shape shape = ids.shape;
  shape[0] = 1;
  const int64_t width = numel(shape);
  return Indices(shape, std::vector<int64_t>(ids.values.begin(), ids.values.begin() + width));
}

// The first position of the first row of a [B, ...] index batch, as [1, 1].
Indices first_position(const Indices& ids) {
  if (ids.shape.size() != 2 || ids.numel() == 0) return ids;
  return Indices({1, 1}, {ids.values.front()});
}

}  // namespace

HookFilter::HookFilter(std::string pattern) : description_(std::move(pattern)) {}
HookFilter::HookFilter(const char* pattern) : description_(pattern) {}
HookFilter::HookFilter(std::function<bool(const std::string&)> predicate, std::string description)
    : description_(std::move(description)), predicate_(std::move(predicate)) {}

HookFilter HookFilter::all() {
  return HookFilter("*");
}

bool HookFilter::matches(const std::string& name) const {
  return predicate_ ? predicate_(name) : glob_match(description_, name);
}

const Tensor& ActivationCache::at(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) {
    throw ConfigError("ActivationCache: '" + name +
                      "' is not cached; closest: " + closest(name, names_));
  }
  return it->second;
}

int64_t ActivationCache::bytes() const {
  int64_t total = 0;
  for (const auto& [_, value] : values_) total += value.numel() * dtype_size(value.dtype());
  return total;
}

void ActivationCache::insert(const std::string& name, const Tensor& value) {
  if (values_.emplace(name, value).second) names_.push_back(name);
}

namespace {

// The error for a filter that matched none of names (the model's points, in forward order).
ConfigError no_point_error(const std::string& caller, const HookFilter& filter,
                           const std::vector<std::string>& names) {
  return ConfigError(
      caller + ": '" + filter.description() +
      "' matches no hook point of this model; closest: " + closest(filter.description(), names));
}

// activation through an identity node whose backward hands function (a backward hook of the
// point `name`) a copy of the incoming gradient, and passes on its replacement or the copy. An
// activation no parameter produced (sinusoidal positions) is made a leaf first, so that its
// gradient is still computed (the leaf's own grad() is never read).
Tensor with_backward_hook(const Tensor& activation, const std::string& name,
                          HookFunction function) {
  Tensor input = activation;
  if (!input.requires_grad()) input = activation.detach().set_requires_grad();
  auto node = std::make_shared<detail::Node>();
  node->shape = activation.shape();
  node->dtype = activation.dtype();
  node->storage = activation.node()->storage;
  return record<"backward_hook">(
      Tensor(std::move(node)), {input}, [name, function = std::move(function)](const Tensor& grad) {
        // The engine's gradients may share storage with other gradients: the hook gets its own.
        const Tensor own = grad.clone();
        const Tensor replacement = function(own, name);
        if (!replacement.defined()) return std::vector<Tensor>{own};
        if (replacement.shape() != own.shape() || replacement.dtype() != own.dtype()) {
          throw ShapeError("backward hook on " + name + ": replacement " +
                           to_string(replacement.shape()) + " " + dtype_name(replacement.dtype()) +
                           " is not the gradient's " + to_string(own.shape()) + " " +
                           dtype_name(own.dtype()));
        }
        return std::vector<Tensor>{replacement};
      });
}

}  // namespace

// What one call of run_with_hooks, run_with_cache or hook_points asks of the points, and which
// points the pass met (for checking the filters after it).
class HookSession {
 public:
  HookSession(const Module& model, const std::vector<Hook>& hooks)
      : hooks_(hooks), hook_matched_(hooks.size(), false), previous_(active) {
    for (const auto& [path, module] : model.named_modules()) paths_.emplace(module, path);
    for (size_t i = hooks_.size(); i-- > 0;) {
      if (hooks_[i].direction == HookDirection::Backward) backward_.push_back(i);
    }
    active = this;
  }
  ~HookSession() { active = previous_; }
  HookSession(const HookSession&) = delete;
  HookSession& operator=(const HookSession&) = delete;

  static HookSession* current() { return active; }

  void list_into(std::vector<HookPointInfo>* listed) { listed_ = listed; }
  void cache_into(ActivationCache* cache, const HookFilter* filter, bool gradients,
                  size_t stop_after) {
    cache_ = cache;
    cache_filter_ = filter;
    gradients_ = gradients;
    stop_after_ = stop_after;
  }
  // The gradient each cached point's backward hook received, by name in forward order (left
  // undefined where no gradient reached the point).
  const std::vector<std::pair<std::string, std::shared_ptr<Tensor>>>& gradients() const {
    return gradients_read_;
  }

  // After a whole pass: throws ConfigError, as matching_points, for the first hook filter (then
  // the cache's) that matched none of the points the pass met.
  void check_filters_matched(const std::string& caller) const {
    for (size_t i = 0; i < hooks_.size(); ++i) {
      if (!hook_matched_[i]) throw no_point_error(caller, hooks_[i].filter, met_);
    }
    if (cache_filter_ && cache_->names().empty())
      throw no_point_error(caller, *cache_filter_, met_);
  }

  bool wanted(const Module& owner, const char* point) {
    return listed_ || wanted(point_name(owner, point));
  }

  // A hook may replace the value or the gradient there, or the cache reads its gradient: the
  // model must then use the point's own tensor. Never while listing.
  bool replaced(const Module& owner, const char* point) {
    if (listed_ || !wanted(owner, point)) return false;
    const std::string name = point_name(owner, point);
    if (gradients_ && cache_filter_ && cache_filter_->matches(name)) return true;
    return std::any_of(hooks_.begin(), hooks_.end(),
                       [&](const Hook& hook) { return hook.filter.matches(name); });
  }

  Tensor apply(const Module& owner, const char* point, const Tensor& activation) {
    const std::string name = point_name(owner, point);
    if (listed_) {
      listed_->push_back({name, hook_point_row(point).letters, activation.shape()});
      return activation;
    }
    if (!wanted(name)) return activation;
    Tensor value = previous_ ? previous_->forward_hooks(name, activation) : activation;
    for (size_t i = 0; i < hooks_.size(); ++i) {
      const Hook& hook = hooks_[i];
      if (!hook.filter.matches(name)) continue;
      hook_matched_[i] = true;
      if (hook.direction == HookDirection::Backward) continue;
      value = replaced(hook, name, value);
    }
    const bool cached = cache_ && cache_filter_->matches(name);
    if (cached) {
      cache_->insert(name, value.detach());
      if (gradients_) {
        // Nearest the activation, so that it reads the gradient the backward hooks pass on.
        auto slot = std::make_shared<Tensor>();
        gradients_read_.emplace_back(name, slot);
        value = with_backward_hook(value, name, [slot](const Tensor& grad, const std::string&) {
          *slot = grad;
          return Tensor();
        });
      }
    }
    // Wrapped last listed first: the first listed meets the gradient first on the way back.
    for (const size_t i : backward_) {
      if (hooks_[i].filter.matches(name))
        value = with_backward_hook(value, name, hooks_[i].function);
    }
    if (cached && stop_after_ > 0 && cache_->names().size() == stop_after_) throw StopForward{};
    return value;
  }

 private:
  // value after this session's forward hooks and those of the sessions it is nested in, outer
  // first: a scope's hooks (an intervention) stay applied inside an inner session (a cache).
  Tensor forward_hooks(const std::string& name, const Tensor& activation) {
    Tensor value = previous_ ? previous_->forward_hooks(name, activation) : activation;
    if (listed_) return value;
    for (size_t i = 0; i < hooks_.size(); ++i) {
      const Hook& hook = hooks_[i];
      if (hook.direction != HookDirection::Forward || !hook.filter.matches(name)) continue;
      hook_matched_[i] = true;
      value = replaced(hook, name, value);
    }
    return value;
  }

  static Tensor replaced(const Hook& hook, const std::string& name, const Tensor& value) {
    const Tensor replacement = hook.function(value, name);
    if (!replacement.defined()) return value;
    if (replacement.shape() != value.shape() || replacement.dtype() != value.dtype()) {
      throw ShapeError("hook on " + name + ": replacement " + to_string(replacement.shape()) + " " +
                       dtype_name(replacement.dtype()) + " is not the activation's " +
                       to_string(value.shape()) + " " + dtype_name(value.dtype()));
    }
    return replacement;
  }

  std::string point_name(const Module& owner, const char* point) const {
    const auto it = paths_.find(&owner);
    if (it == paths_.end() || it->second.empty()) return point;
    return it->second + "." + point;
  }

  // Whether a hook or the cache reads the point, decided once per name; the first time a name
  // is asked about, the pass has met the point.
  bool wanted(const std::string& name) {
    const auto it = wanted_.find(name);
    if (it != wanted_.end()) return it->second;
    met_.push_back(name);
    bool wanted = (cache_filter_ && cache_filter_->matches(name)) ||
                  (previous_ && previous_->forward_wanted(name));
    for (const Hook& hook : hooks_) wanted = wanted || hook.filter.matches(name);
    return wanted_.emplace(name, wanted).first->second;
  }

  bool forward_wanted(const std::string& name) const {
    for (const Hook& hook : hooks_) {
      if (hook.direction == HookDirection::Forward && hook.filter.matches(name)) return true;
    }
    return previous_ && previous_->forward_wanted(name);
  }

  static thread_local HookSession* active;

  const std::vector<Hook>& hooks_;
  std::vector<bool> hook_matched_;
  std::vector<size_t> backward_;  // the backward hooks' indices, last first
  HookSession* previous_;
  std::unordered_map<const Module*, std::string> paths_;
  std::unordered_map<std::string, bool> wanted_;
  std::vector<std::string> met_;  // the points met, in forward order
  std::vector<HookPointInfo>* listed_ = nullptr;
  ActivationCache* cache_ = nullptr;
  const HookFilter* cache_filter_ = nullptr;
  bool gradients_ = false;
  size_t stop_after_ = 0;
  std::vector<std::pair<std::string, std::shared_ptr<Tensor>>> gradients_read_;
};

thread_local HookSession* HookSession::active = nullptr;

bool hooks_running() {
  return HookSession::current() != nullptr;
}

Tensor hook_point(const Module& owner, const char* point, const Tensor& activation) {
  HookSession* session = HookSession::current();
  return session ? session->apply(owner, point, activation) : activation;
}

bool hook_wanted(const Module& owner, const char* point) {
  HookSession* session = HookSession::current();
  return session && session->wanted(owner, point);
}

bool hook_replaced(const Module& owner, const char* point) {
  HookSession* session = HookSession::current();
  return session && session->replaced(owner, point);
}

std::vector<std::string> matching_points(const std::vector<HookPointInfo>& points,
                                         const HookFilter& filter, const std::string& caller) {
  std::vector<std::string> names, matched;
  for (const HookPointInfo& point : points) {
    names.push_back(point.name);
    if (filter.matches(point.name)) matched.push_back(point.name);
  }
  if (matched.empty()) throw no_point_error(caller, filter, names);
  return matched;
}

HookFilter any_of_points(const std::vector<HookPointInfo>& points,
                         const std::vector<std::string>& patterns, const std::string& caller) {
  std::vector<HookFilter> filters;
  for (const std::string& pattern : patterns) {
    matching_points(points, pattern, caller);
    filters.emplace_back(pattern);
  }
  return HookFilter(
      [filters = std::move(filters)](const std::string& name) {
        return std::any_of(filters.begin(), filters.end(),
                           [&](const HookFilter& filter) { return filter.matches(name); });
      },
      caller);
}

namespace {

// The points' names of model, listed by a pass without a graph over the first position of
// batch's first row: the names do not depend on the lengths, and one position costs little.
std::vector<HookPointInfo> points_of_one_position(const SequenceModel& model,
                                                  const SequenceBatch& batch) {
  return hook_points(model, {first_position(batch.source), first_position(batch.inputs),
                             first_position(batch.targets)});
}

void check_hooks(const std::vector<HookPointInfo>& points, const std::vector<Hook>& hooks,
                 const char* caller) {
  for (const Hook& hook : hooks) matching_points(points, hook.filter, caller);
}

void check_backward_hooks_can_fire(const std::vector<Hook>& hooks, bool backward_pass,
                                   const char* caller, const char* reason) {
  const bool any = std::any_of(hooks.begin(), hooks.end(), [](const Hook& hook) {
    return hook.direction == HookDirection::Backward;
  });
  if (any && !backward_pass) throw ConfigError(std::string(caller) + ": " + reason);
}

}  // namespace

std::vector<HookPointInfo> hook_points(const SequenceModel& model, const SequenceBatch& batch) {
  const SequenceBatch one{first_row(batch.source), first_row(batch.inputs),
                          first_row(batch.targets)};
  NoGradGuard no_grad;
  std::vector<HookPointInfo> points;
  const std::vector<Hook> none;
  // A model in training mode draws dropout masks: the listing must not move their stream.
  const Generator dropout_state = *model.dropout_gen;
  {
    HookSession session(model, none);
    session.list_into(&points);
    model.forward(one);
  }
  *model.dropout_gen = dropout_state;
  return points;
}

HookScope::HookScope(const SequenceModel& model, const SequenceBatch& batch,
                     std::vector<Hook> hooks)
    : hooks_(std::move(hooks)) {
  check_hooks(points_of_one_position(model, batch), hooks_, "HookScope");
  session_ = std::make_unique<HookSession>(model, hooks_);
}

HookScope::~HookScope() = default;

Tensor run_with_hooks(const SequenceModel& model, const SequenceBatch& batch,
                      const std::vector<Hook>& hooks) {
  check_backward_hooks_can_fire(hooks, grad_enabled(), "run_with_hooks",
                                "backward hooks need grad mode, and a NoGradGuard is alive");
  HookSession session(model, hooks);
  Tensor logits = model.forward(batch);
  session.check_filters_matched("run_with_hooks");
  return logits;
}

ActivationCache run_with_cache(const SequenceModel& model, const SequenceBatch& batch,
                               const HookFilter& filter, const CacheOptions& options) {
  check_backward_hooks_can_fire(options.hooks, options.gradients, "run_with_cache",
                                "backward hooks fire only with gradients (no backward pass runs)");
  const bool stop_early = !options.gradients && !options.logits;
  size_t stop_after = 0;
  if (stop_early) {
    const std::vector<HookPointInfo> points = points_of_one_position(model, batch);
    check_hooks(points, options.hooks, "run_with_cache");
    stop_after = matching_points(points, filter, "run_with_cache").size();
  }
  ActivationCache cache;
  HookSession session(model, options.hooks);
  session.cache_into(&cache, &filter, options.gradients, stop_after);
  try {
    cache.logits = model.forward(batch);
  } catch (const StopForward&) {
    return cache;
  }
  session.check_filters_matched("run_with_cache");
  if (options.gradients) {
    cache.loss = sequence_loss(cache.logits, batch);
    cache.loss.backward();
    for (const auto& [name, grad] : session.gradients()) {
      // A point the loss does not depend on (a position past every target) gets no gradient.
      const Tensor& activation = cache.at(name);
      cache.insert(name + "_grad",
                   grad->defined() ? *grad : Tensor::zeros(activation.shape(), activation.dtype()));
    }
    cache.loss = cache.loss.detach();
  }
  cache.logits = cache.logits.detach();
  return cache;
}

Tensor zero_head(const Tensor& activation, int64_t axis, int64_t head) {
  const int64_t rank = activation.rank();
  if (axis < 0 || axis >= rank || head < 0 || head >= activation.size(axis)) {
    throw ShapeError("zero_head: head " + std::to_string(head) + " of axis " +
                     std::to_string(axis) + " is outside " + to_string(activation.shape()));
  }
  Shape mask_shape(static_cast<size_t>(rank), 1);  // [1, .., H, .., 1]
  mask_shape[static_cast<size_t>(axis)] = activation.size(axis);
  std::vector<double> keep(static_cast<size_t>(activation.size(axis)), 1.0);
  keep[static_cast<size_t>(head)] = 0.0;
  return activation * Tensor::from_vector(keep, mask_shape, activation.dtype());
}

}  // namespace gradlab::nn
