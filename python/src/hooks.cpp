// run_with_cache and run_with_hooks for Python: a hook is a Python function called with a
// writable numpy view of the activation (forward) or of the gradient (backward) and the point's
// name; it returns None (the array as it now is) or a replacement array. Filters arrive as lists
// of names and globs (the package turns predicates into names); a name that matches no point is
// a KeyError naming the closest.
#include <chrono>

#include "autograd/graph.h"
#include "python/src/bindings.h"

namespace gradlab::python {
namespace {

nn::HookFilter resolve(Checkpoint& c, const std::vector<std::string>& patterns,
                       const std::string& caller) {
  try {
    return nn::any_of_points(c.points(), patterns, caller);
  } catch (const ConfigError& e) {
    throw py::key_error(e.what());
  }
}

// A Python function for C++ closures that may be copied and dropped without the GIL (a backward
// hook lives in the autograd graph): the copies share one reference, released under the GIL.
std::shared_ptr<const py::function> hold(py::function function) {
  return {new py::function(std::move(function)), [](const py::function* held) {
            py::gil_scoped_acquire gil;
            delete held;
          }};
}

// Hooks from [(patterns, function)], each function called under the GIL, appended to out.
void add_hooks(Checkpoint& c, const py::list& hooks, nn::HookDirection direction,
               const std::string& caller, std::vector<nn::Hook>& out) {
  const std::string what =
      direction == nn::HookDirection::Forward ? "hook on " : "backward hook on ";
  for (const py::handle& item : hooks) {
    const auto [patterns, function] =
        item.cast<std::pair<std::vector<std::string>, py::function>>();
    out.push_back(
        {resolve(c, patterns, caller),
         [held = hold(function), what](const Tensor& value, const std::string& name) -> Tensor {
           py::gil_scoped_acquire gil;
           const py::object result = (*held)(to_numpy(value), name);
           if (result.is_none()) return Tensor();
           return from_numpy(result, what + name);
         },
         direction});
  }
}

std::vector<nn::Hook> make_hooks(Checkpoint& c, const py::list& fwd_hooks,
                                 const py::list& bwd_hooks, const std::string& caller) {
  std::vector<nn::Hook> hooks;
  add_hooks(c, fwd_hooks, nn::HookDirection::Forward, caller, hooks);
  add_hooks(c, bwd_hooks, nn::HookDirection::Backward, caller, hooks);
  return hooks;
}

// The backward pass of loss into freshly zeroed parameter gradients, which stay for
// Model.named_gradients; zeroed again when a backward hook raises, so that no partial
// gradient is left.
void backward_into_fresh_gradients(Checkpoint& c, const Tensor& loss) {
  c.model->zero_grad();
  try {
    loss.backward();
  } catch (...) {
    c.model->zero_grad();
    throw;
  }
}

}  // namespace

const std::vector<nn::HookPointInfo>& Checkpoint::points() {
  if (points_.empty()) points_ = nn::hook_points(*model, longest_batch(*this));
  return points_;
}

void bind_hooks(py::module_& m) {
  m.def(
      "run_with_cache",
      [](Checkpoint& c, const py::handle& tokens, const py::handle& source,
         const py::handle& targets, const std::vector<std::string>& patterns, bool gradients,
         const py::list& fwd_hooks, const py::list& bwd_hooks) {
        const nn::SequenceBatch batch = make_batch(c, tokens, source, targets);
        const nn::HookFilter filter = resolve(c, patterns, "run_with_cache");
        nn::CacheOptions options{.gradients = gradients,
                                 .hooks = make_hooks(c, fwd_hooks, bwd_hooks, "run_with_cache")};
        c.mark_parameters_written();
        nn::ActivationCache cache;
        {
          py::gil_scoped_release release;
          std::optional<NoGradGuard> no_graph;
          if (!gradients) no_graph.emplace();
          try {
            cache = nn::run_with_cache(*c.model, batch, filter, options);
          } catch (...) {
            if (gradients) c.model->zero_grad();
            throw;
          }
          if (gradients) c.model->zero_grad();  // the cache's backward filled them
        }
        py::dict values;
        for (const std::string& name : cache.names())
          values[py::str(name)] = to_numpy(cache.at(name));
        const py::object loss = cache.loss.defined() ? py::object(py::float_(cache.loss.item()))
                                                     : py::object(py::none());
        return py::make_tuple(to_numpy(cache.logits), values, loss);
      },
      py::arg("model"), py::arg("tokens"), py::arg("source"), py::arg("targets"),
      py::arg("patterns"), py::arg("gradients"), py::arg("fwd_hooks"), py::arg("bwd_hooks"));

  // With backward hooks, the forward pass is followed by the backward pass of the loss
  // (nn::sequence_loss: next-token, or the targets given), whose parameter gradients stay.
  m.def(
      "run_with_hooks",
      [](Checkpoint& c, const py::handle& tokens, const py::handle& source,
         const py::handle& targets, const py::list& fwd_hooks, const py::list& bwd_hooks,
         bool loss) -> py::object {
        const nn::SequenceBatch batch = make_batch(c, tokens, source, targets);
        const std::vector<nn::Hook> hooks = make_hooks(c, fwd_hooks, bwd_hooks, "run_with_hooks");
        const bool backward = !bwd_hooks.empty();
        c.mark_parameters_written();
        Tensor logits, value;
        {
          py::gil_scoped_release release;
          std::optional<NoGradGuard> no_graph;
          if (!backward) no_graph.emplace();
          logits = nn::run_with_hooks(*c.model, batch, hooks);
          if (loss || backward) value = nn::sequence_loss(logits, batch);
          if (backward) backward_into_fresh_gradients(c, value);
        }
        if (loss) return py::float_(value.item());
        return to_numpy(logits.detach());
      },
      py::arg("model"), py::arg("tokens"), py::arg("source"), py::arg("targets"),
      py::arg("fwd_hooks"), py::arg("bwd_hooks"), py::arg("loss"));

  m.def(
      "check_filters",
      [](Checkpoint& c, const std::vector<std::vector<std::string>>& filters,
         const std::string& caller) {
        for (const std::vector<std::string>& patterns : filters) resolve(c, patterns, caller);
      },
      py::arg("model"), py::arg("filters"), py::arg("caller"));

  // The C++ side of examples/python/bench_hooks.py: seconds per run_with_cache call without Python.
  m.def(
      "time_run_with_cache",
      [](Checkpoint& c, const py::handle& tokens, const std::vector<std::string>& patterns,
         int64_t repeats) {
        const nn::SequenceBatch batch = make_batch(c, tokens, py::none(), py::none());
        const nn::HookFilter filter = resolve(c, patterns, "time_run_with_cache");
        py::gil_scoped_release release;
        NoGradGuard no_graph;
        const auto start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < repeats; ++i) nn::run_with_cache(*c.model, batch, filter);
        const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
        return elapsed.count() / static_cast<double>(repeats);
      },
      py::arg("model"), py::arg("tokens"), py::arg("patterns"), py::arg("repeats"));

  m.def(
      "hook_point_names",
      [](Checkpoint& c) {
        std::vector<std::string> names;
        for (const nn::HookPointInfo& p : c.points()) names.push_back(p.name);
        return names;
      },
      py::arg("model"));
}

}  // namespace gradlab::python
