// The loss means what it says: on text from a Markov chain whose entropy rate H is known
// exactly, a small language model's held-out loss comes within 0.05 bits per character of H,
// and a model asked the wrong question (the token after next) lands far above it.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <fstream>

#include "autograd/graph.h"
#include "tests/cli_runner.h"
#include "tests/data/markov.h"
#include "train/fit.h"

namespace gradlab::train {
namespace test_entropy {

TEST(Entropy, HeldOutBitsPerCharacterMatchTheSourcesEntropyRate) {
  omp_set_num_threads(1);
  const testing::MarkovText source(8, 3, 7);
  const double rate = source.entropy_rate_bits();
  testing::TempDir dir;
  const std::string path = dir.file("markov.txt");
  std::ofstream(path) << source.generate(80000, 11);

  RunConfig config;
  config.task.name = "text";
  config.task.text.data = path;
  config.task.text.context = 16;
  config.net.d_model = 32;
  config.net.attention.num_heads = 2;
  config.net.num_layers = 1;
  config.net.feed_forward.d_ff = 64;
  config.batch_size = 32;
  config.schedule.lr = 3e-3;
  config.schedule.warmup_steps = 50;
  config.task.text.eval_iters = 500;  // 8000 predictions: the estimate's noise is about 0.01 bits
  const auto corpus = load_text_corpus(config.task.text);
  finalize(config);
  Trainer trainer(config,
                  std::make_shared<data::TextTask>(config.task.name, config.task.text, corpus));
  LoopPolicy policy;
  policy.steps = 800;
  policy.eval_every = 800;
  policy.target_exact_match = 0;
  Observer quiet;
  const double bits = fit(trainer, policy, quiet).last_metrics.loss / std::log(2.0);
  EXPECT_NEAR(bits, rate, 0.05) << "entropy rate " << rate << " bits per character";

  // The same held-out text, but each target two tokens ahead: the chain's first-order
  // knowledge is no longer enough, and the loss says so.
  const Indices windows =
      corpus->validation_windows(config.seed, 500, config.task.text.context + 1);
  const int64_t rows = windows.shape[0], width = windows.shape[1];
  std::vector<int64_t> inputs, targets;
  for (int64_t r = 0; r < rows; ++r) {
    const auto row = windows.values.begin() + r * width;
    inputs.insert(inputs.end(), row, row + config.task.text.context);
    targets.insert(targets.end(), row + 2, row + width);
  }
  NoGradGuard no_grad;
  trainer.model().eval();
  const nn::SequenceBatch shifted{{},
                                  Indices({rows, config.task.text.context}, inputs),
                                  Indices({rows, config.task.text.context}, targets)};
  const double wrong_bits = trainer.model().loss(shifted).item() / std::log(2.0);
  EXPECT_GT(wrong_bits, rate + 0.5) << "predicting two ahead cannot be as good as one";
}

// The held-out set a text run evaluates: --eval-iters fixed windows, or with --eval-full every
// token of the validation split once.
TEST(Entropy, EvaluationReadsTheWindowsItIsConfiguredFor) {
  omp_set_num_threads(1);
  testing::TempDir dir;
  const std::string path = dir.file("markov.txt");
  std::ofstream(path) << testing::MarkovText(5, 2, 3).generate(3000, 4);
  for (const bool full : {false, true}) {
    SCOPED_TRACE(full ? "--eval-full" : "--eval-iters");
    RunConfig config;
    config.task.name = "text";
    config.task.text.data = path;
    config.task.text.context = 12;
    config.net.d_model = 16;
    config.net.attention.num_heads = 2;
    config.net.num_layers = 1;
    config.net.feed_forward.d_ff = 24;
    config.batch_size = 7;  // evaluation runs in chunks of the batch size
    config.task.text.eval_iters = 30;
    config.task.text.eval_full = full;
    const auto corpus = load_text_corpus(config.task.text);
    finalize(config);
    Trainer trainer(config,
                    std::make_shared<data::TextTask>(config.task.name, config.task.text, corpus));
    const Indices windows =
        full ? corpus->validation_all(config.task.text.context)
             : corpus->validation_windows(config.seed, 30, config.task.text.context);
    EXPECT_EQ(windows.shape[0], full ? (corpus->validation_size() - 1) / 12 : 30);
    NoGradGuard no_grad;
    trainer.model().eval();
    const double expected = trainer.model().loss(trainer.model().make_batch(windows, 0)).item();
    EXPECT_NEAR(trainer.evaluate().loss, expected, 1e-5);
  }
}

}  // namespace test_entropy
}  // namespace gradlab::train
