// The toy-models-of-superposition task (Elhage et al. 2022, ARENA's setup), for the tms model
// (nn/toy_model.h): batches of features [B, I, n], feature i of instance j present with
// probability p_j and then uniform in [0, 1), else 0. The densities fall geometrically from 1
// for the first instance to --min-density for the last (ARENA: 20^-linspace(0, 1, I)). Fresh
// samples at every step; the model reconstructs its input, so there are no targets.
#pragma once

#include <vector>

#include "data/task.h"
#include "data/tms_options.h"
#include "nn/toy_model.h"

namespace gradlab::data {

class TmsTask : public Task {
 public:
  TmsTask(std::string name, const TmsOptions& options);

  // The vocabulary is the n features and the positions the I instances: the model's sizes.
  int64_t vocab_size() const override { return options_.features; }
  int64_t positions(const std::string& model_kind) const override;
  std::string length_flag() const override;
  std::string vocabulary_flag() const override;
  HeldoutSize heldout_size(int64_t eval_size, int64_t model_positions) const override;
  std::shared_ptr<const DataSource> data_source(std::shared_ptr<const nn::SequenceModel> model,
                                                uint64_t seed, int64_t batch_size,
                                                int64_t eval_size) const override;
  // Judged by the reconstruction loss: there is nothing to match exactly.
  bool judged_by_loss() const override { return true; }
  bool predicts_tokens() const override { return false; }

  // p_j, instance j's feature probability: min_density^(j / (I - 1)), 1 for one instance.
  std::vector<double> densities() const;
  // rows samples [rows, I, n] from gen, float32.
  Tensor draw(Generator& gen, int64_t rows) const;

 private:
  TmsOptions options_;
};

// task as the tms task; throws ConfigError ("a model of task copy, not of tms (...)") for another.
const TmsTask& tms_task_of(const Task& task);

// What a trained toy model of superposition holds, per instance j: its density p_j, its
// W [I, m, n] and the geometry of W's columns (`gradlab superposition`, gradlab.superposition).
struct Superposition {
  std::vector<double> densities;  // [I]
  Tensor weight;                  // W [I, m, n], a copy
  nn::FeatureGeometry geometry;
};

// The superposition of a model of task; throws ConfigError as tms_task_of does for another task.
Superposition superposition(const nn::SequenceModel& model, const Task& task);

}  // namespace gradlab::data
