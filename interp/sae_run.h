// An SAE's run on a checkpoint, as `gradlab sae train` and Python's sae_train make it: train's Adam
// with SAELens's defaults (betas (0, 0.999), no weight decay) as the SaeOptimizer train_sae steps,
// and the checkpoint's own batches streamed through the model. Header-only: the interp library
// reads no training code; the programs that train an SAE (the command line, Python, tests) link
// train.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>

#include "autograd/error.h"
#include "interp/files/sae_file.h"
#include "interp/sae_model.h"
#include "interp/sae_training.h"
#include "train/optimizer.h"
#include "train/trained_model.h"

namespace gradlab::interp {

struct SaeAdam {
  explicit SaeAdam(Sae& sae)
      : adam(train::make_optimizer(
            {.name = "adam", .beta1 = 0.0, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0},
            sae.named_parameters())),
        optimizer{[this](double lr) { adam->step(lr); }, [this] { return adam->state(); }} {}
  SaeAdam(const SaeAdam&) = delete;
  SaeAdam& operator=(const SaeAdam&) = delete;

  std::unique_ptr<train::Optimizer> adam;
  SaeOptimizer optimizer;
};

// Held-out sequences per forward pass of an SAE's evaluation.
inline constexpr int64_t kSaeRowsPerPass = 64;

// Trains an SAE of `config` (its d_in, checkpoint and fingerprint filled in here) on trained's
// model at config.hook, batch_size sequences a step (0: the checkpoint's), in evaluation mode;
// writes dir/metrics.csv as it goes and dir/sae.h5 at the end (dir is created; the caller has
// refused one that holds files). Throws ConfigError for a hook the model lacks or that is not
// [B, T, C], FileError for a directory that cannot be written.
inline std::shared_ptr<Sae> train_sae_on_checkpoint(
    const train::TrainedModel& trained, SaeConfig config, const SaeTrainingOptions& options,
    int64_t batch_size, const std::filesystem::path& dir,
    const std::function<void(const SaeStepLog&, const SaeEvaluation&)>& report) {
  const nn::SequenceModel& model = *trained.model;
  nn::EvalScope eval(*trained.model);
  const train::RunConfig& rc = trained.config;
  const std::shared_ptr<const data::DataSource> data = trained.task->data_source(
      trained.model, rc.seed, batch_size > 0 ? batch_size : rc.batch_size, rc.eval_size);
  const nn::SequenceBatch heldout = data->heldout();
  config.checkpoint = trained.path;
  config.model_fingerprint = model_fingerprint(model);
  config.d_in = sae_inputs(model, rows_of(heldout, 0, 1), config.hook).size(1);
  auto sae = std::make_shared<Sae>(config);
  SaeAdam adam(*sae);
  std::filesystem::create_directories(dir);
  std::ofstream log(dir / "metrics.csv");
  if (!log) throw FileError((dir / "metrics.csv").string() + ": cannot write the metrics");
  train_sae_on_model(
      model, *sae, [&](int64_t step) { return data->training_batch(step); }, heldout,
      kSaeRowsPerPass, adam.optimizer, options, log, report);
  write_sae_file((dir / "sae.h5").string(), *sae);
  return sae;
}

}  // namespace gradlab::interp
