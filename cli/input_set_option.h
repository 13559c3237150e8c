// The inputs of an instrument that reads many examples, written once for every such command:
// one prompt (--input or --prompt), a file of prompts (--data FILE) or the first N rows of the
// checkpoint's held-out set (--held-out N), as batches of equal-length sequences sized to
// --max-memory so that a data set streams; and how the command reduces them (--reduce, --at).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/checkpoint_args.h"
#include "nn/sequence_model.h"
#include "train/trained_model.h"

namespace gradlab::cli {

// Which of the group's flags a command takes besides --data, --held-out and --max-memory.
struct InputSetFlags {
  bool prompt = true;   // --input and --prompt (one prompt); heads has random sequences
  bool pairs = false;   // --data holds clean<TAB>corrupt pairs (patch), and no --held-out
  bool reduce = false;  // --reduce mean|none (none: every example kept)
  bool at = false;      // --at answer|all
  const char* at_default = "all";
  const char* memory = "";  // what --max-memory bounds ("the cache")
};

// The values bound to the group's flags.
struct InputSetArgs {
  std::string data;
  int64_t held_out = 0;
  std::string reduce = "mean";
  std::string at;         // add_input_set_options: flags.at_default
  double max_memory = 0;  // GiB; 0: 80% of the machine's memory
  bool given = false;     // parse_input_set: --data or --held-out
};

// Adds the group's flags (with add_prompt_options when flags.prompt); call it where
// add_prompt_options would be.
void add_input_set_options(CheckpointArgs& c, InputSetArgs& s, const InputSetFlags& flags);

// After parse_with_checkpoint or parse_with_output: with flags.prompt, exactly one of --input,
// --prompt, --data and --held-out (else at most one of --data and --held-out), and the values of
// --held-out, --reduce, --at and --max-memory; returns -1 to go on or the usage exit code.
int parse_input_set(const std::string& command, CheckpointArgs& c, InputSetArgs& s,
                    const InputSetFlags& flags);

// Sequences of one length: a batch as the model reads it, teacher forced.
struct InputGroup {
  nn::SequenceBatch batch;                    // [R, T] (and [R, S] source)
  std::vector<std::vector<int64_t>> answers;  // [R]: the model's answer, or the row's targets
  std::vector<int64_t> examples;              // [R]: each row's index in the set
};

// A checkpoint's model and the examples it reads, grouped by length.
struct InputSet {
  train::TrainedModel trained;
  std::vector<InputGroup> groups;
  int64_t examples = 0;
  // For one prompt, what it was read as (shown() and the tokens a file records).
  std::optional<PromptedRun> prompt;
  // Where example i came from ("--data prompts.txt line 3", "--held-out row 2"), for errors.
  std::vector<std::string> origins;

  nn::SequenceModel& model() const { return *trained.model; }
  bool text() const { return trained.vocabulary.has_value(); }
  // -1 when every example has one length, else the first example whose length differs.
  int64_t first_unequal() const;
};

// Loads c.checkpoint and reads the examples: the prompt (as load_prompted_run and
// answered_batch read it), each line of --data (a prompt as --input or --prompt reads it; the
// model's answer decoded as for one prompt) or the first --held-out rows (their targets); returns
// -1 to go on, or the usage exit code after a one-line error naming the file and line, or the
// flag, that is wrong.
int load_input_set(const std::string& command, const CheckpointArgs& c, const InputSetArgs& s,
                   std::optional<InputSet>& loaded);

// For a command of pairs (InputSetFlags::pairs): each line of --data a clean and a corrupted
// prompt separated by a tab, each read as load_input_set reads a line, into `clean` and `corrupt`
// (example i of one is the pair of example i of the other, in groups of the same index); the
// two prompts of a line must be of one length. Returns -1 or the usage exit code, as
// load_input_set.
int load_prompt_pairs(const std::string& command, const CheckpointArgs& c, const InputSetArgs& s,
                      std::optional<InputSet>& clean, std::optional<InputSet>& corrupt);

// The usage error for examples of unequal lengths, naming the first that differs and why the
// command needs one length (`why`: "--reduce none stacks the examples"), or -1.
int refuse_unequal_lengths(const std::string& command, const CheckpointArgs& c, const InputSet& set,
                           const std::string& why);

// Rows per batch so that bytes_per_row of live memory per example stays within --max-memory:
// at least 1 (a single example above the limit is the command's to refuse).
int64_t rows_per_batch(const InputSetArgs& s, double bytes_per_row);

// Bytes a forward pass keeps alive per example, estimated as every hook point of one sequence
// (group's first row) in the model's dtype.
double forward_bytes_per_row(const InputSet& set);

// Calls visit on batches of at most `rows` rows of one length, group by group and in the set's
// order within a group; rows of the batch are examples[first, first + R) of its group.
void for_each_batch(
    const InputSet& set, int64_t rows,
    const std::function<void(const InputGroup& group, const nn::SequenceBatch& batch,
                             int64_t first)>& visit);

// Calls visit on the batches of clean (as for_each_batch) with the same rows of corrupt.
void for_each_pair_batch(
    const InputSet& clean, const InputSet& corrupt, int64_t rows,
    const std::function<void(const nn::SequenceBatch& clean, const nn::SequenceBatch& corrupt,
                             int64_t first_example)>& visit);

// Each row's answer position in batch: a toy task's first position with a target (where the
// model reads the separator and predicts the answer's first token), a language model's last
// position (where it predicts the next token). [R]
std::vector<int64_t> answer_positions(const nn::SequenceBatch& batch, bool text);

// "3 prompts of --data FILE", "2 held-out rows", "1 prompt": what the set is, for a summary.
std::string described(const InputSet& set, const InputSetArgs& s);

}  // namespace gradlab::cli
