// The task of a program's own data: a marker, not data. A checkpoint that a program wrote for
// a built-in model through train::Trainer records it, with the vocabulary and positions of that
// model, so that the command line can rebuild the model; the batches stayed in the program.
#include <memory>
#include <string>
#include <utility>

#include "autograd/error.h"
#include "autograd/format.h"
#include "data/task_rows.h"

namespace gradlab::data {
namespace {

class ProgramData : public Task {
 public:
  ProgramData(std::string name, const ProgramDataOptions& options)
      : Task(std::move(name)), vocab_size_(options.vocab_size), positions_(options.positions) {
    if (vocab_size_ < 1) {
      throw ConfigError("vocab-size must be positive, got " + format_number(vocab_size_));
    }
    if (positions_ < 1) {
      throw ConfigError("max-len must be positive, got " + format_number(positions_));
    }
  }
  int64_t vocab_size() const override { return vocab_size_; }
  // The program sized its model's position table itself, for whichever kind it is.
  int64_t positions(const std::string&) const override { return positions_; }
  std::string length_flag() const override { return "max-len " + format_number(positions_); }
  std::string vocabulary_flag() const override {
    return "vocab-size " + format_number(vocab_size_);
  }
  HeldoutSize heldout_size(int64_t, int64_t model_positions) const override {
    return {0, model_positions, "no held-out set", "[0, T] held-out set"};
  }
  std::shared_ptr<const DataSource> data_source(std::shared_ptr<const nn::SequenceModel>, uint64_t,
                                                int64_t, int64_t) const override {
    throw ConfigError(
        "trained on a program's own data, which is not in the checkpoint: only that program can "
        "train or evaluate it");
  }

 private:
  int64_t vocab_size_, positions_;
};

}  // namespace

std::shared_ptr<Task> make_program_data_task(const TaskConfig& config) {
  return std::make_shared<ProgramData>(config.name, config.program);
}

std::vector<ConfigField> program_data_fields(TaskConfig& c) {
  // Never flags: gradlab train does not run a program's data.
  return {
      {"vocab-size", &c.program.vocab_size, "the program's vocabulary V", true, false, false},
      {"max-len", &c.program.positions, "the positions of the program's model", true, false, false},
  };
}

}  // namespace gradlab::data
