// The modular task's own settings (data/modular_task.h): (a op b) mod modulus, its pairs split
// once.
#pragma once

#include <cstdint>
#include <string>

namespace gradlab::data {

struct ModularOptions {
  int64_t modulus = 113;          // P: the prompt's numbers and the answer are in [0, P)
  std::string operation = "add";  // a row of modular_operations()
  double train_fraction = 0.3;    // of the P^2 pairs; the rest is held out
};

}  // namespace gradlab::data
