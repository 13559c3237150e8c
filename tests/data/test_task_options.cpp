// Each task reads its own options struct of TaskConfig and nothing else (mqar: its own and the
// two flags it shares, by name), and each task flag of the run's table is bound to its field in
// the nested struct, which /config keeps under the same key.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <variant>

#include "data/mqar_task.h"
#include "data/sequence_task.h"
#include "data/tasks.h"
#include "train/config.h"

namespace gradlab::data {
namespace task_options {

TaskConfig named(const std::string& name) {
  TaskConfig config;
  config.name = name;
  return config;
}

// Every task options struct but the sequence tasks' set away from its defaults.
TaskConfig with_other_options(TaskConfig config) {
  config.modular = {.modulus = 7, .operation = "mul", .train_fraction = 0.5};
  config.mqar.pairs = 3;
  config.text.context = 5;
  config.text.data = "unread.txt";
  config.program = {.vocab_size = 4, .positions = 9};
  return config;
}

TEST(TaskOptions, SequenceTaskReadsOnlyTheSequenceOptions) {
  for (const std::string name : {"copy", "reverse", "sort", "recall", "induction"}) {
    SCOPED_TRACE(name);
    const std::shared_ptr<SequenceTask> plain = make_sequence_task(named(name));
    const std::shared_ptr<SequenceTask> other = make_sequence_task(with_other_options(named(name)));
    EXPECT_EQ(other->vocab_size(), plain->vocab_size());
    EXPECT_EQ(other->sample_length(), plain->sample_length());
    EXPECT_EQ(other->heldout(3, 5).values, plain->heldout(3, 5).values);

    TaskConfig resized = named(name);
    resized.sequence = {.length = 4, .num_symbols = 20};
    const std::shared_ptr<SequenceTask> task = make_sequence_task(resized);
    EXPECT_EQ(task->length(), 4);
    EXPECT_EQ(task->vocab_size(), 22);
  }
}

TEST(TaskOptions, ModularReadsOnlyTheModularOptions) {
  TaskConfig config = named("modular");
  config.modular = {.modulus = 7, .operation = "mul", .train_fraction = 0.5};
  const std::shared_ptr<SequenceTask> task = make_sequence_task(config);
  EXPECT_EQ(task->vocab_size(), 9);                            // =, 0..6, padding
  EXPECT_EQ(task->training_set_size(), 25);                    // round(0.5 * 49)
  EXPECT_EQ(task->answer({3, 4}), (std::vector<int64_t>{7}));  // 2 * 3 mod 7 = 6, token 7

  config.sequence = {.length = 5, .num_symbols = 30};  // the sequence tasks' sizes: unread
  const std::shared_ptr<SequenceTask> same = make_sequence_task(config);
  EXPECT_EQ(same->vocab_size(), 9);
  EXPECT_EQ(same->prompt_length(), 2);
  EXPECT_EQ(same->heldout(1, 6).values, task->heldout(1, 6).values);
}

TEST(TaskOptions, MqarReadsItsPairsAndTheSharedContextAndSymbols) {
  TaskConfig config = named("mqar");
  config.mqar.pairs = 3;
  config.text.context = 16;
  config.sequence.num_symbols = 12;
  config.modular.modulus = 5;
  config.program = {.vocab_size = 4, .positions = 9};
  const std::shared_ptr<Task> task = make_task(config);
  const auto* mqar = dynamic_cast<const MqarTask*>(task.get());
  ASSERT_NE(mqar, nullptr);
  EXPECT_EQ(mqar->pairs(), 3);
  EXPECT_EQ(mqar->context(), 16);
  EXPECT_EQ(mqar->vocab_size(), 12);
  EXPECT_EQ(mqar->positions("decoder"), 16);
}

TEST(TaskOptions, EachTaskFlagIsBoundToItsNestedField) {
  train::RunConfig config;
  std::map<std::string, int> seen;
  std::map<std::string, const void*> bound;
  for (const ConfigField& f : train::config_fields(config)) {
    ++seen[f.key];
    bound[f.key] = std::visit([](auto* p) { return static_cast<const void*>(p); }, f.value);
  }
  const TaskConfig& t = config.task;
  const std::map<std::string, const void*> expected{
      {"length", &t.sequence.length},
      {"symbols", &t.sequence.num_symbols},
      {"pairs", &t.mqar.pairs},
      {"context", &t.text.context},
      {"modulus", &t.modular.modulus},
      {"operation", &t.modular.operation},
      {"train-fraction", &t.modular.train_fraction},
      {"data", &t.text.data},
  };
  for (const auto& [key, field] : expected) {
    SCOPED_TRACE(key);
    EXPECT_EQ(seen[key], 1);  // one flag, parsed once
    EXPECT_EQ(bound[key], field);
  }

  config.task.name = own_data_kind().name;
  std::map<std::string, const void*> own;
  for (const ConfigField& f : train::run_fields(config)) {
    own[f.key] = std::visit([](auto* p) { return static_cast<const void*>(p); }, f.value);
  }
  EXPECT_EQ(own["vocab-size"], &t.program.vocab_size);
  EXPECT_EQ(own["max-len"], &t.program.positions);
}

// The nested fields keep their /config keys: a modular run's options survive the round trip.
TEST(TaskOptions, NestedOptionsKeepTheirConfigKeys) {
  train::RunConfig config;
  config.task = named("modular");
  config.task.modular = {.modulus = 11, .operation = "sub", .train_fraction = 0.4};
  const std::vector<train::ConfigEntry> entries = train::to_entries(config);
  const auto value = [&](const std::string& key) {
    const auto it = std::find_if(entries.begin(), entries.end(),
                                 [&](const train::ConfigEntry& e) { return e.first == key; });
    return it == entries.end() ? std::string("missing") : train::to_string(it->second);
  };
  EXPECT_EQ(value("modulus"), "11");
  EXPECT_EQ(value("operation"), "sub");
  EXPECT_EQ(value("train-fraction"), "0.4");
  EXPECT_EQ(value("length"), "missing");  // another task's option
  const train::RunConfig loaded = train::from_entries(entries, "run.h5");
  EXPECT_EQ(loaded.task.modular.modulus, 11);
  EXPECT_EQ(loaded.task.modular.operation, "sub");
  EXPECT_EQ(loaded.task.modular.train_fraction, 0.4);
}

}  // namespace task_options
}  // namespace gradlab::data
