// train::load_trained_model: a checkpoint's path -> its model, task, configuration and
// vocabulary, for each kind of checkpoint (a toy task's decoder and encoder-decoder, a language
// model, a program's own data), and the error of a missing file.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/error.h"
#include "tests/cli_runner.h"
#include "tests/program_checkpoint.h"
#include "train/trained_model.h"

namespace gradlab::train {
namespace test_trained_model {

using train::load_trained_model;
using train::TrainedModel;

TEST(TrainedModel, ADecoderToyCheckpointHasItsTaskAndNoVocabulary) {
  const std::string path = testing::toy_checkpoint(testing::kTiny, "decoder");
  const TrainedModel trained = load_trained_model(path);
  EXPECT_EQ(trained.path, path);
  EXPECT_EQ(trained.config.model, "decoder");
  EXPECT_EQ(trained.config.task.name, "copy");
  ASSERT_NE(trained.task, nullptr);
  EXPECT_NE(trained.task->sequence_task(), nullptr);
  EXPECT_EQ(trained.language_model(), nullptr);
  EXPECT_FALSE(trained.vocabulary.has_value());
  EXPECT_FALSE(trained.own_data);
  EXPECT_GT(trained.step, 0);
  ASSERT_NE(trained.model, nullptr);
  EXPECT_EQ(trained.model->config().d_model, 8);
  // The parameters are the checkpoint's: its held-out loss is the one its run measured.
  const train::Metrics scored = train::scoring_trainer(trained)->evaluate();
  EXPECT_TRUE(std::isfinite(scored.loss));
}

TEST(TrainedModel, AnEncoderDecoderCheckpointRebuildsItsKind) {
  const TrainedModel trained =
      load_trained_model(testing::toy_checkpoint(testing::kTiny, "seq2seq"));
  EXPECT_EQ(trained.config.model, "seq2seq");
  EXPECT_EQ(trained.model->kind(), "seq2seq");
  EXPECT_FALSE(trained.vocabulary.has_value());
}

TEST(TrainedModel, ATextCheckpointHasItsVocabulary) {
  const TrainedModel trained = load_trained_model(testing::tiny_text_model());
  ASSERT_NE(trained.language_model(), nullptr);
  ASSERT_TRUE(trained.vocabulary.has_value());
  EXPECT_EQ(trained.vocabulary->size(), trained.model->config().vocab_size);
  EXPECT_EQ(trained.vocabulary->encode("cat").size(), 3u);  // character-level
}

TEST(TrainedModel, AProgramsOwnDataCheckpointReadsRawIdsAndHasNoHeldOutSet) {
  testing::TempDir dir;
  const std::string path = dir.file("program.h5");
  testing::train_and_save(nn::make_sequence_model("decoder", testing::small_net("decoder")), path);
  const TrainedModel trained = load_trained_model(path);
  EXPECT_TRUE(trained.own_data);
  EXPECT_EQ(trained.language_model(), nullptr);
  EXPECT_FALSE(trained.vocabulary.has_value());
  EXPECT_EQ(trained.model->config().vocab_size, testing::kVocabulary);
  EXPECT_EQ(trained.step, 2);
  try {
    train::scoring_trainer(trained);
    FAIL() << "a program's own data has no held-out set in the file";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("trained on a program's own data"), std::string::npos)
        << e.what();
  }
}

TEST(TrainedModel, AMissingFileIsACheckpointErrorNamingIt) {
  testing::TempDir dir;
  const std::string path = dir.file("never-written.h5");
  try {
    load_trained_model(path);
    FAIL() << "a missing file loaded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

}  // namespace test_trained_model
}  // namespace gradlab::train
