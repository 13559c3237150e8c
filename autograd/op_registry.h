// The registry of the ops that record a backward closure. An op names itself where it records
// its node, record<"gelu">(out, {x}, backward) (graph.h), and that name is registered when the
// program starts, whether or not the op ever runs: no op can record a backward without being
// known here. The gradient-check coverage test requires every registered op in the graph of some
// check (autograd/op_checks.cpp, nn/module_checks.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "autograd/tensor.h"

namespace gradlab {

// An op's name as a template argument: record<"gelu"> deduces OpName<5>.
template <size_t N>
struct OpName {
  char chars[N];
  consteval OpName(const char (&name)[N]) {
    for (size_t i = 0; i < N; ++i) chars[i] = name[i];
  }
};

// The names of every op that records a backward closure in this program, sorted, each once.
std::vector<std::string> registered_ops();

// The names of the ops in the graph that produced root (root's own included), sorted, each once.
std::vector<std::string> ops_in_graph(const Tensor& root);

namespace detail {

// Adds name to the registry; returns true. Called once per op name at static initialisation.
bool register_op(const char* name);

// The registration of op Name, instantiated by every record<Name> call; its initialiser runs
// before main. Name.chars is the template parameter object's, one for the whole program.
template <OpName Name>
struct OpRegistration {
  static inline const bool registered = register_op(Name.chars);
};

}  // namespace detail
}  // namespace gradlab
