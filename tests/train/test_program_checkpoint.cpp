// Checkpoints of a program's own run: a Trainer built from a built-in model and a DataSource of
// the program's records the model in /config (the marker of a program's own data, the model's
// sizes and fields, no loop fields), so that load_model rebuilds it while load_run refuses it;
// a model of one's own saves and loads in its program, with only the /config it was given.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "data/tasks.h"
#include "tests/cli_runner.h"
#include "tests/program_checkpoint.h"
#include "tests/test_helpers.h"
#include "train/trainer.h"

namespace gradlab::train {
namespace test_program_checkpoint {

using testing::Bigram;
using testing::kVocabulary;
using testing::small_net;
using testing::TempDir;
using testing::train_and_save;

const ConfigValue* find(const std::vector<ConfigEntry>& entries, const std::string& key) {
  const auto it = std::find_if(entries.begin(), entries.end(),
                               [&](const ConfigEntry& e) { return e.first == key; });
  return it == entries.end() ? nullptr : &it->second;
}

TEST(ProgramCheckpoint, ABuiltInModelRecordsItselfAndLoadsBack) {
  for (const std::string& kind : testing::token_model_kinds()) {
    SCOPED_TRACE(kind);
    TempDir dir;
    const std::string path = dir.file("program.h5");
    const auto model = nn::make_sequence_model(kind, small_net(kind));
    EXPECT_EQ(model->kind(), kind);
    train_and_save(model, path, {{"digits", int64_t{3}}, {"d-model", int64_t{999}}});

    const std::vector<ConfigEntry> config = read_checkpoint_config(path);
    ASSERT_NE(find(config, "task"), nullptr);
    EXPECT_EQ(to_string(*find(config, "task")), data::own_data_kind().name);
    EXPECT_EQ(to_string(*find(config, "model")), kind);
    EXPECT_EQ(to_string(*find(config, "vocab-size")), std::to_string(kVocabulary));
    EXPECT_EQ(to_string(*find(config, "max-len")), std::to_string(model->config().max_len));
    EXPECT_EQ(to_string(*find(config, "d-model")), "8") << "the model's field wins";
    EXPECT_EQ(to_string(*find(config, "init")), nn::kGpt2Init);
    ASSERT_NE(find(config, "digits"), nullptr) << "the program's own entries are kept";
    EXPECT_EQ(to_string(*find(config, "digits")), "3");
    for (const char* loop_field : {"lr", "optimizer", "steps", "batch-size", "length", "seed"}) {
      EXPECT_EQ(find(config, loop_field), nullptr) << loop_field << " is not the program's";
    }

    const LoadedModel loaded = load_model(path);
    EXPECT_EQ(loaded.model->kind(), kind);
    EXPECT_EQ(loaded.model->config().max_len, model->config().max_len);
    const auto saved = model->named_parameters();
    const auto read = loaded.model->named_parameters();
    ASSERT_EQ(saved.size(), read.size());
    for (size_t i = 0; i < saved.size(); ++i) {
      EXPECT_EQ(saved[i].second.to_vector(), read[i].second.to_vector()) << saved[i].first;
    }
    try {
      load_run(path);
      FAIL() << "load_run read a program's own data";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(path + ": trained on a program's own data"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ProgramCheckpoint, ARunsOwnConfigIsKept) {
  RunConfig config;
  config.task.sequence.length = 2;
  config.task.sequence.num_symbols = 3;
  config.net.d_model = 8;
  config.net.attention.num_heads = 2;
  config.net.num_layers = 1;
  config.net.feed_forward.d_ff = 8;
  config.batch_size = 2;
  config.eval_size = 2;
  finalize(config);
  const Trainer trainer(config);
  EXPECT_EQ(trainer.checkpoint().config, to_entries(config));
  EXPECT_EQ(find(to_entries(config), "vocab-size"), nullptr);
  EXPECT_EQ(find(to_entries(config), "max-len"), nullptr);
}

TEST(ProgramCheckpoint, AModelOfOnesOwnKeepsItsConfigAndIsRefusedByTheFactoryPath) {
  TempDir dir;
  const std::string path = dir.file("own.h5");
  const auto model = std::make_shared<Bigram>(small_net("decoder"));
  EXPECT_TRUE(model->kind().empty());
  train_and_save(model, path, {{"width", int64_t{8}}});
  const CheckpointData data = read_checkpoint(path);
  ASSERT_EQ(data.config.size(), 1u);
  EXPECT_EQ(data.config[0].first, "width");
  EXPECT_EQ(data.model.size(), model->named_parameters().size());

  // The program restores it into a model of its own.
  const auto again = std::make_shared<Bigram>(small_net("decoder"));
  restore_tensors(path, kModelGroup, read_checkpoint(path).model, again->named_parameters());
  EXPECT_EQ(again->head->weight.to_vector(), model->head->weight.to_vector());

  try {
    load_model(path);
    FAIL() << "load_model built a model of one's own";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("/config/task: missing (not a gradlab run nor a "
                                         "built-in model: a program's own model"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace test_program_checkpoint
}  // namespace gradlab::train
