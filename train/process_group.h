// ProcessGroup: the processes that train one model together, data parallel. Every process holds
// the whole model and optimizer; each computes the gradients of its share of every global batch,
// and a sum across the group makes every process apply the same update. One process alone is a
// group of one, whose collectives do nothing.
//
// Under `mpirun -np N gradlab train ...` the group is MPI_COMM_WORLD (Open MPI; the build option
// GRADLAB_MPI). Only the main thread calls a collective, and every process must call the same
// collectives in the same order, as MPI requires.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace gradlab::train {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual int rank() const { return 0; }
  virtual int size() const { return 1; }
  // Elementwise sums over all processes, in place. Every process ends with the same values, bit
  // for bit (the MPI implementation computes each sum once and hands it to all).
  virtual void sum(std::span<float> /*values*/) {}
  virtual void sum(std::span<double> /*values*/) {}
  // Every process's `value`, in rank order.
  virtual std::vector<uint64_t> gather(uint64_t value) { return {value}; }
  // Every process's `text` (any length, each its own), in rank order.
  virtual std::vector<std::string> gather_text(const std::string& text) { return {text}; }
  // Ends every process of the group with this exit code: for an error one process met alone,
  // which would leave the others waiting in a collective.
  [[noreturn]] virtual void abort(int exit_code);

  // True if any process passes true.
  bool any(bool flag);
};

// The group this process belongs to: MPI_COMM_WORLD once join_world() found an MPI launch, else
// a group of one.
ProcessGroup& world();

// Joins MPI_COMM_WORLD when this process was started by mpirun (Open MPI's environment is
// set), and does nothing otherwise, so that a plain run never starts MPI. Throws
// std::runtime_error if mpirun started several processes of a gradlab built without MPI.
// Call once, at the start of main; the world is left at exit.
void join_world(int* argc, char*** argv);

// Whether this build can train on several processes (GRADLAB_MPI).
bool built_with_mpi();

// "rank 1 of 3" for messages, or "" for a group of one.
std::string rank_label(const ProcessGroup& group);

}  // namespace gradlab::train
