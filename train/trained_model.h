// A trained model to study: one call, load_trained_model, turns a checkpoint's path into its
// model, its task, its configuration and a language model's vocabulary. Every command of the
// command line that reads a checkpoint's model, and the Python front end, load through it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/task.h"
#include "data/text.h"
#include "nn/sequence_model.h"
#include "train/config.h"
#include "train/trainer.h"

namespace gradlab::train {

struct TrainedModel {
  std::string path;                            // the checkpoint it was read from
  RunConfig config;                            // its /config, checked as a new run's would be
  std::shared_ptr<nn::SequenceModel> model;    // parameters restored, in training mode
  std::shared_ptr<data::Task> task;            // config's task; a text task has not read its file
  std::optional<data::Vocabulary> vocabulary;  // a language model's; none for a toy task
  int64_t step = 0;                            // the training step the checkpoint was saved at
  bool own_data = false;  // trained on a program's own data: prompts are raw token ids

  // The task as a language model, or nullptr for a toy task or a program's own data.
  const data::LanguageModelTask* language_model() const;
};

// Reads the checkpoint at checkpoint_path: its configuration, then the model it describes,
// then its parameters, each tensor's name and shape checked before a value is read (the
// optimizer state is not read). Throws CheckpointError naming the file and the item for a
// missing, damaged or inconsistent file (its vocabulary and its tensors' rows disagree, a
// non-finite parameter), ConfigError for a configuration no task accepts.
TrainedModel load_trained_model(const std::string& checkpoint_path);

// A Trainer around trained.model that scores the model's held-out set (Trainer::evaluate), or
// for a language model every token of `text` when it is given (ConfigError for another task).
// Its optimizer is new and its step 0: it is for scoring, not for training on. Throws
// ConfigError for a program's own data, which is not in the checkpoint.
std::unique_ptr<Trainer> scoring_trainer(const TrainedModel& trained, const std::string& text = "");

}  // namespace gradlab::train
