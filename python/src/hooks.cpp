// run_with_cache and run_with_hooks for Python: a hook is a Python function called with a
// writable numpy view of the activation and the point's name; it returns None (the activation
// as it now is) or a replacement array. Filters arrive as lists of names and globs (the package
// turns predicates into names); a name that matches no point is a KeyError naming the closest.
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

// Hooks from [(patterns, function)], each function called under the GIL.
std::vector<nn::Hook> make_hooks(Checkpoint& c, const py::list& hooks, const std::string& caller) {
  std::vector<nn::Hook> out;
  for (const py::handle& item : hooks) {
    const auto [patterns, function] =
        item.cast<std::pair<std::vector<std::string>, py::function>>();
    out.push_back({resolve(c, patterns, caller),
                   [function](const Tensor& activation, const std::string& name) -> Tensor {
                     py::gil_scoped_acquire gil;
                     const py::object result = function(to_numpy(activation), name);
                     if (result.is_none()) return Tensor();
                     return from_numpy(result, "hook on " + name);
                   }});
  }
  return out;
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
         const py::list& fwd_hooks) {
        const nn::SequenceBatch batch = make_batch(c, tokens, source, targets);
        const nn::HookFilter filter = resolve(c, patterns, "run_with_cache");
        nn::CacheOptions options{.gradients = gradients,
                                 .hooks = make_hooks(c, fwd_hooks, "run_with_cache")};
        c.mark_parameters_written();
        nn::ActivationCache cache;
        {
          py::gil_scoped_release release;
          std::optional<NoGradGuard> no_graph;
          if (!gradients) no_graph.emplace();
          cache = nn::run_with_cache(*c.model, batch, filter, options);
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
      py::arg("patterns"), py::arg("gradients"), py::arg("fwd_hooks"));

  m.def(
      "run_with_hooks",
      [](Checkpoint& c, const py::handle& tokens, const py::handle& source,
         const py::handle& targets, const py::list& fwd_hooks, bool loss) -> py::object {
        const nn::SequenceBatch batch = make_batch(c, tokens, source, targets);
        const std::vector<nn::Hook> hooks = make_hooks(c, fwd_hooks, "run_with_hooks");
        c.mark_parameters_written();
        Tensor logits, value;
        {
          py::gil_scoped_release release;
          NoGradGuard no_graph;
          logits = nn::run_with_hooks(*c.model, batch, hooks);
          if (loss) value = nn::sequence_loss(logits, batch);
        }
        if (loss) return py::float_(value.item());
        return to_numpy(logits);
      },
      py::arg("model"), py::arg("tokens"), py::arg("source"), py::arg("targets"),
      py::arg("fwd_hooks"), py::arg("loss"));

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
