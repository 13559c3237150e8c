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

// What one call of run_with_hooks, run_with_cache or hook_points asks of the points.
class HookSession {
 public:
  HookSession(const Module& model, const std::vector<Hook>& hooks)
      : hooks_(hooks), previous_(active) {
    for (const auto& [path, module] : model.named_modules()) paths_.emplace(module, path);
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
  const std::vector<std::pair<std::string, Tensor>>& probes() const { return probes_; }

  bool wanted(const Module& owner, const char* point) {
    if (listed_) return true;
    const std::string name = point_name(owner, point);
    const auto it = wanted_.find(name);
    if (it != wanted_.end()) return it->second;
    bool wanted = cache_filter_ && cache_filter_->matches(name);
    for (const Hook& hook : hooks_) wanted = wanted || hook.filter.matches(name);
    return wanted_.emplace(name, wanted).first->second;
  }

  Tensor apply(const Module& owner, const char* point, const Tensor& activation) {
    const std::string name = point_name(owner, point);
    if (listed_) {
      listed_->push_back({name, hook_point_row(point).letters, activation.shape()});
      return activation;
    }
    Tensor value = activation;
    for (const Hook& hook : hooks_) {
      if (!hook.filter.matches(name)) continue;
      const Tensor replacement = hook.function(value, name);
      if (!replacement.defined()) continue;
      if (replacement.shape() != value.shape() || replacement.dtype() != value.dtype()) {
        throw ShapeError("hook on " + name + ": replacement " + to_string(replacement.shape()) +
                         " " + dtype_name(replacement.dtype()) + " is not the activation's " +
                         to_string(value.shape()) + " " + dtype_name(value.dtype()));
      }
      value = replacement;
    }
    if (cache_ && cache_filter_->matches(name)) {
      cache_->insert(name, value.detach());
      if (gradients_) {
        // The gradient of the loss with respect to the activation arrives in this zero leaf,
        // which changes no value (x + 0 is x).
        Tensor probe = Tensor::zeros(value.shape(), value.dtype());
        probe.set_requires_grad(true);
        probes_.emplace_back(name, probe);
        value = value + probe;
      }
      if (stop_after_ > 0 && cache_->names().size() == stop_after_) throw StopForward{};
    }
    return value;
  }

 private:
  std::string point_name(const Module& owner, const char* point) const {
    const auto it = paths_.find(&owner);
    if (it == paths_.end() || it->second.empty()) return point;
    return it->second + "." + point;
  }

  static thread_local HookSession* active;

  const std::vector<Hook>& hooks_;
  HookSession* previous_;
  std::unordered_map<const Module*, std::string> paths_;
  std::unordered_map<std::string, bool> wanted_;
  std::vector<HookPointInfo>* listed_ = nullptr;
  ActivationCache* cache_ = nullptr;
  const HookFilter* cache_filter_ = nullptr;
  bool gradients_ = false;
  size_t stop_after_ = 0;
  std::vector<std::pair<std::string, Tensor>> probes_;
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

std::vector<std::string> matching_points(const std::vector<HookPointInfo>& points,
                                         const HookFilter& filter, const std::string& caller) {
  std::vector<std::string> names, matched;
  for (const HookPointInfo& point : points) {
    names.push_back(point.name);
    if (filter.matches(point.name)) matched.push_back(point.name);
  }
  if (matched.empty()) {
    throw ConfigError(
        caller + ": '" + filter.description() +
        "' matches no hook point of this model; closest: " + closest(filter.description(), names));
  }
  return matched;
}

HookFilter any_of_points(const std::vector<HookPointInfo>& points,
                         const std::vector<std::string>& patterns, const std::string& caller) {
  for (const std::string& pattern : patterns) matching_points(points, pattern, caller);
  return HookFilter(
      [patterns](const std::string& name) {
        return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& pattern) {
          return HookFilter(pattern).matches(name);
        });
      },
      caller);
}

namespace {

void check_hooks(const std::vector<HookPointInfo>& points, const std::vector<Hook>& hooks,
                 const char* caller) {
  for (const Hook& hook : hooks) matching_points(points, hook.filter, caller);
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
  check_hooks(hook_points(model, batch), hooks_, "HookScope");
  session_ = std::make_unique<HookSession>(model, hooks_);
}

HookScope::~HookScope() = default;

Tensor run_with_hooks(const SequenceModel& model, const SequenceBatch& batch,
                      const std::vector<Hook>& hooks) {
  check_hooks(hook_points(model, batch), hooks, "run_with_hooks");
  HookSession session(model, hooks);
  return model.forward(batch);
}

ActivationCache run_with_cache(const SequenceModel& model, const SequenceBatch& batch,
                               const HookFilter& filter, const CacheOptions& options) {
  const std::vector<HookPointInfo> points = hook_points(model, batch);
  check_hooks(points, options.hooks, "run_with_cache");
  const size_t matched = matching_points(points, filter, "run_with_cache").size();
  const bool stop_early = !options.gradients && !options.logits;
  ActivationCache cache;
  HookSession session(model, options.hooks);
  session.cache_into(&cache, &filter, options.gradients, stop_early ? matched : 0);
  try {
    cache.logits = model.forward(batch);
  } catch (const StopForward&) {
    return cache;
  }
  if (options.gradients) {
    cache.loss = sequence_loss(cache.logits, batch);
    cache.loss.backward();
    for (const auto& [name, probe] : session.probes()) {
      // A point the loss does not depend on (a position past every target) gets no gradient.
      const Tensor grad = probe.grad();
      cache.insert(name + "_grad",
                   grad.defined() ? grad : Tensor::zeros(probe.shape(), probe.dtype()));
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
