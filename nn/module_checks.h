// The registry of module gradient checks: each builds a small module in float64 with random
// parameters, all axis sizes different, and checks the gradient of every parameter and input.
// `gradlab gradcheck` lists these after the op checks; the test suite runs them all. Every
// registered norm, positional scheme, score modifier and feed-forward (nn/module_registry.h) has
// one, and a program adds its own.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autograd/gradcheck.h"

namespace gradlab::nn {

struct ModuleCheck {
  std::string name;
  std::string sizes;  // the configuration, for the table
  std::function<GradcheckReport(uint64_t seed)> run;
};

// gradlab's checks, one per registered module (but the "none" rows), then the ones a program
// added.
// The reference stays valid until the next registration (of a check or a module).
const std::vector<ModuleCheck>& module_checks();

// Adds check to module_checks(): for a module of one's own that is not a registered one (those
// have theirs already). Thread-safe.
void register_module_check(ModuleCheck check);

}  // namespace gradlab::nn
