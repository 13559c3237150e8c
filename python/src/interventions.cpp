// model.intervene(specs): `--intervene`'s interventions (interp/intervention.h), parsed from the
// same text, in force on a model's runs until close() (the Python context manager's exit).
#include <memory>

#include "interp/intervention.h"
#include "python/src/bindings.h"
#include "train/trainer.h"

namespace gradlab::python {
namespace {

// The interventions in force while open; close() undoes them (hooks removed, parameters
// restored) and may be called again.
struct OpenInterventions {
  std::unique_ptr<interp::AppliedInterventions> applied;
};

std::unique_ptr<OpenInterventions> open_interventions(Checkpoint& c,
                                                      const std::vector<std::string>& specs) {
  std::vector<interp::Intervention> interventions;
  for (const std::string& spec : specs) interventions.push_back(interp::parse_intervention(spec));
  c.mark_parameters_written();
  auto open = std::make_unique<OpenInterventions>();
  py::gil_scoped_release release;
  // Means and resampled activations come from the checkpoint's held-out set, as on the command
  // line; the scoring leaves the model in training mode, so evaluation mode is set back.
  const std::unique_ptr<train::Trainer> trainer = train::scoring_trainer(c);
  open->applied = std::make_unique<interp::AppliedInterventions>(
      *c.model, trainer->heldout(), interventions, [&] { trainer->evaluate(); });
  c.model->eval();
  return open;
}

}  // namespace

void bind_interventions(py::module_& m) {
  py::class_<OpenInterventions>(m, "OpenInterventions").def("close", [](OpenInterventions& open) {
    open.applied.reset();
  });
  m.def("intervene", &open_interventions, py::arg("model"), py::arg("specs"),
        "the interventions of specs in force on model's runs on this thread until close()");
}

}  // namespace gradlab::python
