// The pairs of a modular-addition checkpoint's run.
#include "train/modular_pairs.h"

#include "autograd/error.h"
#include "data/modular_task.h"

namespace gradlab::train {

ModularPairBatches modular_pair_batches(const TrainedModel& trained) {
  const auto* task = dynamic_cast<const data::ModularTask*>(trained.task.get());
  const std::string reads = "; the Fourier analysis reads modular addition (--task modular)";
  if (!task || trained.own_data) {
    throw ConfigError(trained.path + ": a model of task " + trained.config.task.name + reads);
  }
  if (trained.config.task.modular.operation != "add") {
    throw ConfigError(trained.path + ": a model of --operation " +
                      trained.config.task.modular.operation + reads);
  }
  const RunConfig& config = trained.config;
  // Full batch: the training set as a whole, whatever --batch-size the run drew with.
  const auto data = task->data_source(trained.model, config.seed, 0, config.eval_size);
  return {.modulus = task->modulus(), .train = *data->training_set(), .heldout = data->heldout()};
}

}  // namespace gradlab::train
