// The memory estimate of a run, from its configuration alone, and the check against the limit.
#include "train/memory.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "autograd/error.h"
#include "autograd/format.h"
#include "nn/sequence_model.h"

namespace gradlab::train {
namespace {

constexpr double kFloat = 4, kIndex = 8, kGiB = 1024.0 * 1024 * 1024;
// The program itself: code, libraries, allocator and thread stacks (about 15-20 MiB measured).
constexpr double kProgram = 32.0 * 1024 * 1024;
// Held-out rows per forward pass: Trainer's evaluation chunk.
constexpr double kEvalChunk = 64;

}  // namespace

std::string gib(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g GiB", bytes / kGiB);
  return text;
}

MemoryEstimate estimate_memory(const RunConfig& c) {
  const nn::ModelFootprint model = nn::model_footprint(c.model, c.net);
  const data::HeldoutSize heldout = make_task(c)->heldout_size(c.eval_size, c.net.max_len);
  // Values, gradients and the two moments of Adam (SGD keeps fewer).
  MemoryEstimate m;
  m.state = kProgram + 4 * kFloat * model.parameters;
  // What the forward keeps for the backward pass (the backward frees as it goes): about, not at
  // most (kEstimateNote; BENCHMARKS.md, "The memory estimate").
  m.activations = kFloat * static_cast<double>(batch_rows(c)) * model.activations_per_sequence;
  const double rows = static_cast<double>(heldout.rows);
  const double positions = static_cast<double>(heldout.positions);
  m.heldout = 3 * kIndex * rows * positions +
              kFloat * std::min(rows, kEvalChunk) * model.inference_per_sequence;
  return m;
}

double memory_limit(const RunConfig& c) {
  return memory_limit(c.max_memory);
}

double memory_limit(double max_memory_gib) {
  if (max_memory_gib > 0) return max_memory_gib * kGiB;
  const double pages = static_cast<double>(::sysconf(_SC_PHYS_PAGES));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  return 0.8 * pages * page;
}

void check_memory(const RunConfig& c) {
  const MemoryEstimate m = estimate_memory(c);
  const double limit = memory_limit(c);
  if (m.total() <= limit) return;
  const std::shared_ptr<data::Task> task = make_task(c);
  // The flag alone: "--length", not "--length 10".
  const std::string length = task->length_flag().substr(0, task->length_flag().find(' '));
  std::string cause;
  if (m.activations >= m.state && m.activations >= m.heldout) {
    cause = "activations " + gib(m.activations) + " for --batch-size " +
            format_number(c.batch_size) +
            (c.batch_size == 0 ? " (all " + format_number(batch_rows(c)) + ")" : "") +
            " sequences of " + format_number(c.net.max_len) + " positions (" + length + ")";
  } else if (m.state >= m.heldout) {
    cause = "parameters and optimizer state " + gib(m.state) +
            " (--d-model, --d-ff, --layers, the vocabulary)";
  } else {
    cause = "the held-out set " + gib(m.heldout) + " (" +
            task->heldout_size(c.eval_size, c.net.max_len).flag + ")";
  }
  throw ConfigError("this configuration needs about " + gib(m.total()) + " (" + kEstimateNote +
                    "), mostly " + cause + ": above the limit of " + gib(limit) +
                    (c.max_memory > 0
                         ? " (--max-memory)"
                         : " (80% of this machine's memory; --max-memory GiB sets it)"));
}

}  // namespace gradlab::train
