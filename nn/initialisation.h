// The table of initialisations a ModelConfig names (`init`, the --init flag): the one place
// that knows their names. A new one is a function and a row in initialisation.cpp.
#pragma once

#include <string>
#include <vector>

#include "autograd/random.h"
#include "nn/module.h"

namespace gradlab::nn {

struct ModelConfig;

// The rows' names, for code that picks one: the default is ModelConfig's.
inline constexpr const char* kDefaultInit = "default";
inline constexpr const char* kGpt2Init = "gpt2";

struct InitKind {
  const char* name;
  const char* help;  // one line: what it draws
  // Redraws model's parameters over the default ones its constructors drew (nothing for the
  // default initialisation).
  void (*apply)(Module& model, const ModelConfig& config, Generator& gen);
};

const std::vector<InitKind>& init_kinds();

// The row named name; throws ConfigError "unknown init 'x' (expected default, gpt2 or
// transformerlens)".
const InitKind& init_kind(const std::string& name);
// "default, gpt2 or transformerlens": the names of the rows, in order.
std::string init_names();

}  // namespace gradlab::nn
