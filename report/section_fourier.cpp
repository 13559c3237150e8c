// The report's Fourier section of a modular-addition run (interp/fourier.h, as `gradlab
// fourier`): the embedding's norm per frequency, the key frequencies, the neurons' frequency
// clusters and the losses of the best checkpoint; and, when `gradlab fourier --run` has written
// the run's fourier.csv, its restricted and excluded loss curves. Left out for other runs.
#include "autograd/error.h"
#include "interp/fourier.h"
#include "report/sections.h"
#include "train/modular_pairs.h"

namespace gradlab::report {

SectionResult collect_fourier(ReportRun& run) {
  train::TrainedModel& trained = run.trained();
  std::optional<train::ModularPairBatches> pairs;
  try {
    pairs = train::modular_pair_batches(trained);
  } catch (const ConfigError&) {
    return {nullptr, ""};  // not a modular-addition run: the section does not apply
  }
  const interp::FourierOptions options;
  interp::FourierAnalysis f;
  {
    nn::EvalScope eval(*trained.model);
    f = interp::analyze_fourier(*trained.model, {pairs->modulus, pairs->train, pairs->heldout},
                                options);
  }
  nlohmann::json data = {{"modulus", f.modulus},
                         {"step", trained.step},
                         {"share", options.share},
                         {"neuron_threshold", options.neuron_threshold},
                         {"embedding_norms", f.embedding_norms},
                         {"key_frequencies", f.key.frequencies},
                         {"key_shares", f.key.shares},
                         {"cluster_counts", f.neurons.counts},
                         {"neurons", f.neurons.cluster.size()},
                         {"clustered_fraction", f.neurons.clustered_fraction},
                         {"losses",
                          {{"train", f.losses.train},
                           {"test", f.losses.test},
                           {"restricted", f.losses.restricted},
                           {"excluded", f.losses.excluded}}},
                         {"curve", csv_columns(run.path("fourier.csv"))}};
  if (data["curve"].is_null()) {
    data["curve_command"] = "gradlab fourier --run " + run.dir();
  }
  return {data, ""};
}

}  // namespace gradlab::report
