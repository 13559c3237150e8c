// induction: a start token, a block of distinct random symbols, and the same block again, the
// sequences on which induction heads form (Olsson et al. 2022; TransformerLens's repeated
// tokens). Every next token is a target; the first copy cannot be predicted, the second can by
// looking back, and the two copies' losses are reported apart (the in-context-learning score is
// their difference). docs/tasks.md has the design and a worked example.
//
// Layout over the sequence tasks' vocabulary (data/sequence_task.h), N = length, V = symbols:
//   0 x1..xL x1..xL   the start token (the separator's id), a block of L distinct symbols of
//                     1..V drawn without replacement, the block again
// L is drawn per sequence uniformly from [ceil(N / 2), N], so that where the second copy starts
// varies and no position alone tells what comes next. A batch's inputs and targets are [B, 2N]:
// inputs the sequence without its last token, targets the next token at each position, and past
// a shorter sequence's end the padding token (V + 1) with nn::kIgnoreTarget.
// Streams: batch `step` of `seed` draws its rows in order from stream_seed(seed, step), the
// held-out set from stream_seed(seed, kHeldoutIndex).
//
// Its prompt (predict, attention, activations --input) is a first copy of 1 to N symbols; the
// model reads the start token and it, and its answer is the copy. (SequenceTask's samples() and
// heldout(), "prompt SEP answer" of fixed length, are not what it trains on.)
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/sequence_task.h"

namespace gradlab::data {

class InductionTask : public SequenceTask {
 public:
  // Throws ConfigError naming the flag: --length below 2 (the blocks' lengths would not vary),
  // --symbols below --length (a block's symbols are distinct), either above 2^20.
  InductionTask(std::string name, const SequenceTaskOptions& options);

  static constexpr int64_t kStart = kSeparator;
  int64_t shortest_block() const { return (length() + 1) / 2; }

  // Training batch `step` (>= 0) of the stream `seed`: inputs and targets [B, 2N], no source.
  // Throws ConfigError for step < 0 or batch_size < 1.
  nn::SequenceBatch training_batch(uint64_t seed, int64_t step, int64_t batch_size) const;
  // The fixed held-out set [count, 2N]: a stream no training step draws from.
  nn::SequenceBatch heldout_batch(uint64_t seed, int64_t count) const;
  // The targets of batch's first copies (predicted at the start token and the first copy) and
  // of its second copies (predicted at the first copy's last token and the second copy): the
  // held-out parts "first_copy" and "second_copy".
  std::vector<TargetPart> copy_parts(const nn::SequenceBatch& batch) const;

  int64_t prompt_length() const override { return length(); }
  int64_t answer_length() const override { return length(); }
  // 2N for the decoder; ConfigError for seq2seq (the copies are one sequence).
  int64_t positions(const std::string& model_kind) const override;
  HeldoutSize heldout_size(int64_t eval_size, int64_t model_positions) const override;
  std::shared_ptr<const DataSource> data_source(std::shared_ptr<const nn::SequenceModel> model,
                                                uint64_t seed, int64_t batch_size,
                                                int64_t eval_size) const override;
  bool judged_by_loss() const override { return true; }
  std::vector<std::string> loss_parts() const override;
  std::vector<int64_t> decoding_prefix(const std::vector<int64_t>& prompt) const override;

 private:
  std::vector<int64_t> answer_of(const std::vector<int64_t>& prompt) const override {
    return prompt;
  }
  void check_prompt_length(int64_t size) const override;
  nn::SequenceBatch draw(Generator& gen, int64_t rows) const;
};

}  // namespace gradlab::data
