// load_trained_model: a checkpoint's path -> its model, task, configuration and vocabulary.
#include "train/trained_model.h"

#include "autograd/error.h"
#include "data/tasks.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"

namespace gradlab::train {

const data::LanguageModelTask* TrainedModel::language_model() const {
  return own_data ? nullptr : task->language_model();
}

TrainedModel load_trained_model(const std::string& checkpoint_path) {
  LoadedModel loaded = load_model(checkpoint_path);
  TrainedModel trained;
  trained.path = checkpoint_path;
  trained.config = std::move(loaded.config);
  trained.model = std::move(loaded.model);
  trained.own_data = data::task_kind(trained.config.task.name).own_data;
  trained.task = make_task(trained.config);
  if (const data::LanguageModelTask* language_model = trained.language_model()) {
    trained.vocabulary = language_model->vocabulary();
  }
  trained.step = read_checkpoint_header(checkpoint_path).train.step;
  return trained;
}

std::unique_ptr<Trainer> scoring_trainer(const TrainedModel& trained, const std::string& text) {
  if (trained.own_data) {
    throw ConfigError(trained.path +
                      ": trained on a program's own data, which is not in the file: no held-out "
                      "set to score nor batches to resume (the program can: Trainer::evaluate)");
  }
  const RunConfig& config = trained.config;
  const std::shared_ptr<nn::SequenceModel>& model = trained.model;
  std::shared_ptr<const DataSource> data;
  if (text.empty()) {
    data = trained.task->data_source(model, config.seed, config.batch_size, config.eval_size);
  } else if (const data::LanguageModelTask* language_model = trained.language_model()) {
    data = language_model->file_source(text, model, config.seed, config.batch_size);
  } else {
    throw ConfigError(trained.path + ": a " + trained.task->name() +
                      " model, not a language model: --data applies to language models");
  }
  // As a checkpoint's own run scores it: the training batch's rows per forward pass.
  const TrainerOptions options{.schedule = config.schedule,
                               .clip_norm = config.clip_norm,
                               .eval_batch_size = batch_rows(config),
                               .data_seed = config.seed,
                               .config = to_entries(config)};
  return std::make_unique<Trainer>(
      model, make_optimizer(config.optimizer, model->named_parameters()), data, options);
}

}  // namespace gradlab::train
