// mqar: multi-query associative recall (Zoology, Arora et al. 2023). Key-value pairs, then every
// key queried once further on; the model answers each query with its key's value at the
// query's own position, so answers are interleaved with the inputs and the batches are laid out
// here rather than by a model's make_batch. Decoder-only. docs/tasks.md has a worked example.
//
// Layout of one sequence of T = context tokens over the vocabulary 0..V-1 (V = symbols),
// N = pairs, as Zoology's generator `_mqar` with its default random_non_queries:
//   positions 0..2N-1   k1 v1 k2 v2 .. kN vN: keys distinct from 1..V/2-1, values distinct from
//                       V/2..V-1 (the two halves of the vocabulary; 0 is never a key)
//   positions 2N..T-1   the query region, slots of two tokens: key i sits at 2N + 2 g_i, its
//                       target there is v_i; the gaps g_i are distinct, drawn one after another
//                       from the slots left with weight (g + 1)^(a - 1), a = kMqarPowerA, so
//                       short gaps are likely
//   every other input   a uniform token of 0..V-1; its target is nn::kIgnoreTarget
// Streams: batch `step` of `seed` draws its rows in order from stream_seed(seed, step) (a pure
// function of seed and step), the held-out set from stream_seed(seed, kHeldoutIndex).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "autograd/random.h"
#include "data/task.h"

namespace gradlab::data {

// Zoology's power_a: the query gaps' power law; 1 would make them uniform.
constexpr double kMqarPowerA = 0.01;

class MqarTask : public Task {
 public:
  // The task of the row `name`: options, and the sizes it reads from the flags it shares with
  // other tasks, context (--context, TextOptions::context) and symbols (--symbols,
  // SequenceTaskOptions::num_symbols). Throws ConfigError naming the flags: --pairs below 1,
  // --context below 4 * --pairs (the pairs and one two-token slot per query), --symbols below
  // 2 * --pairs + 2 (N distinct keys in 1..V/2-1), or a size above 2^20.
  MqarTask(std::string name, const MqarOptions& options, int64_t context, int64_t symbols);

  int64_t pairs() const { return pairs_; }
  int64_t context() const { return context_; }
  // Key symbols are 1..first_value() - 1, value symbols first_value()..V-1.
  int64_t first_value() const { return num_symbols_ / 2; }

  // Training batch `step` (>= 0) of the stream `seed`: inputs and targets [B, T], B =
  // batch_size, no source. Throws ConfigError for step < 0 or batch_size < 1.
  nn::SequenceBatch batch(uint64_t seed, int64_t step, int64_t batch_size) const;
  // The fixed held-out set [count, T]: a stream no training step draws from.
  nn::SequenceBatch heldout(uint64_t seed, int64_t count) const;

  int64_t vocab_size() const override { return num_symbols_; }
  // T for the decoder; ConfigError for a model that reads a prompt and an answer (seq2seq).
  int64_t positions(const std::string& model_kind) const override;
  std::string length_flag() const override;
  std::string vocabulary_flag() const override;
  HeldoutSize heldout_size(int64_t eval_size, int64_t model_positions) const override;
  // The batches above, whatever model reads them (checked when the model is of a built-in kind).
  std::shared_ptr<const DataSource> data_source(std::shared_ptr<const nn::SequenceModel> model,
                                                uint64_t seed, int64_t batch_size,
                                                int64_t eval_size) const override;
  std::string accuracy_name() const override { return "answer accuracy"; }

 private:
  nn::SequenceBatch draw(Generator& gen, int64_t rows) const;

  int64_t pairs_, context_, num_symbols_;
};

}  // namespace gradlab::data
