// Typed exceptions thrown by gradlab. Every message names the op (or component) and the
// offending values, so a caller can print e.what() as one self-explanatory line.
#pragma once

#include <stdexcept>
#include <string>

namespace gradlab {

// Base of every gradlab error that comes from bad input rather than a bug.
struct Error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// Shapes that do not fit together: `matmul: inner dimensions differ: [2,3,4] @ [5,6]`.
struct ShapeError : Error {
  using Error::Error;
};
// An axis outside [-rank, rank).
struct AxisError : Error {
  using Error::Error;
};
// Mixing float32 and float64, or asking for data of the wrong type.
struct DTypeError : Error {
  using Error::Error;
};
// An id or target outside its valid range (embedding rows, class targets).
struct IndexError : Error {
  using Error::Error;
};
// An invalid configuration value (module sizes, hyperparameters).
struct ConfigError : Error {
  using Error::Error;
};
// A checkpoint that is missing, unreadable, of another format or version, or that does not
// match the model it is loaded into. The message names the file and the item.
struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// An output file (not a checkpoint) that cannot be written; the message names the file.
struct FileError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Misuse of the autograd graph, such as a second backward through a freed graph.
struct GraphError : std::logic_error {
  using std::logic_error::logic_error;
};

}  // namespace gradlab
