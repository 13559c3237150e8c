// The tms task: its options' checks, the densities and the seeded draws of its batches.
#include "data/tms_task.h"

#include <cmath>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/ops.h"
#include "data/streams.h"
#include "data/task_rows.h"

namespace gradlab::data {
namespace {

// A training batch per step and a held-out set, each a pure function of the seed.
class TmsData : public DataSource {
 public:
  TmsData(std::shared_ptr<const TmsTask> task, uint64_t seed, int64_t batch_size, int64_t eval_size)
      : task_(std::move(task)), seed_(seed), batch_size_(batch_size) {
    Generator gen(stream_seed(seed_, kHeldoutIndex));
    heldout_.features = task_->draw(gen, eval_size);
  }

  nn::SequenceBatch training_batch(int64_t step) const override {
    Generator gen(stream_seed(seed_, static_cast<uint64_t>(step)));
    nn::SequenceBatch batch;
    batch.features = task_->draw(gen, batch_size_);
    return batch;
  }
  nn::SequenceBatch heldout() const override { return heldout_; }

 private:
  std::shared_ptr<const TmsTask> task_;
  uint64_t seed_;
  int64_t batch_size_;
  nn::SequenceBatch heldout_;
};

}  // namespace

TmsTask::TmsTask(std::string name, const TmsOptions& options)
    : Task(std::move(name)), options_(options) {
  if (options_.features < 1) {
    throw ConfigError("task: --features must be >= 1, got " + format_number(options_.features));
  }
  if (options_.instances < 1) {
    throw ConfigError("task: --instances must be >= 1, got " + format_number(options_.instances));
  }
  // Written as "not inside" so that NaN is refused too.
  if (!(options_.min_density > 0 && options_.min_density <= 1)) {
    throw ConfigError("task: --min-density must be in (0, 1], got " +
                      format_number(options_.min_density));
  }
}

int64_t TmsTask::positions(const std::string& model_kind) const {
  return nn::positions_for_features(model_kind, options_.instances);
}

std::string TmsTask::length_flag() const {
  return "--instances " + format_number(options_.instances);
}

std::string TmsTask::vocabulary_flag() const {
  return "--features " + format_number(options_.features);
}

HeldoutSize TmsTask::heldout_size(int64_t eval_size, int64_t model_positions) const {
  return {eval_size, model_positions, "--eval-size " + format_number(eval_size),
          "[B, I] held-out set"};
}

std::vector<double> TmsTask::densities() const {
  const int64_t count = options_.instances;
  std::vector<double> p(static_cast<size_t>(count), 1.0);
  for (int64_t j = 1; j < count; ++j) {
    p[j] = std::pow(options_.min_density, static_cast<double>(j) / static_cast<double>(count - 1));
  }
  return p;
}

Tensor TmsTask::draw(Generator& gen, int64_t rows) const {
  const NoGradGuard no_grad;
  const Shape shape{rows, options_.instances, options_.features};
  const Tensor density = Tensor::from_vector(densities(), {1, options_.instances, 1});
  const Tensor values = Tensor::uniform(shape, gen, 0.0, 1.0);          // [B, I, n]
  const Tensor present = bernoulli(broadcast_to(density, shape), gen);  // [B, I, n]
  return where(present, values, Tensor::scalar(0.0));
}

std::shared_ptr<const DataSource> TmsTask::data_source(std::shared_ptr<const nn::SequenceModel>,
                                                       uint64_t seed, int64_t batch_size,
                                                       int64_t eval_size) const {
  const std::shared_ptr<const Task> self = weak_from_this().lock();
  if (!self) throw std::logic_error("TmsTask::data_source: the task is not held by a shared_ptr");
  return std::make_shared<TmsData>(std::static_pointer_cast<const TmsTask>(self), seed, batch_size,
                                   eval_size);
}

const TmsTask& tms_task_of(const Task& task) {
  const auto* tms = dynamic_cast<const TmsTask*>(&task);
  if (!tms) {
    throw ConfigError("a model of task " + task.name() +
                      ", not of tms (the toy model of superposition)");
  }
  return *tms;
}

Superposition superposition(const nn::SequenceModel& model, const Task& task) {
  const std::vector<double> densities = tms_task_of(task).densities();
  // The tms task runs only the tms model (TmsTask::positions refuses the others).
  const auto& toy = dynamic_cast<const nn::ToyModel&>(model);
  const Tensor weight = toy.weight.clone();
  return {densities, weight, nn::feature_geometry(weight)};
}

std::vector<ConfigField> tms_task_fields(TaskConfig& c) {
  TmsOptions& t = c.tms;
  return {
      {"features", &t.features, "--task tms: the features n"},
      {"instances", &t.instances,
       "--task tms: models trained at once, each at its own feature density"},
      {"min-density", &t.min_density,
       "--task tms: the last instance's feature probability; the first's is 1, the rest between "
       "geometrically"},
  };
}

std::shared_ptr<Task> make_tms_task(const TaskConfig& config) {
  return std::make_shared<TmsTask>(config.name, config.tms);
}

}  // namespace gradlab::data
