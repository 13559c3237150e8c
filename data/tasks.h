// The table of tasks: one row per kind, the one place that knows their names. A new task is
// its own file in data/ (a class behind data::Task), one row here, its tests, and one line in
// docs/tasks.md.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/config_field.h"
#include "data/task.h"

namespace gradlab::data {

struct TaskKind {
  const char* name;
  const char* help;  // one line: what the task is
  // The kind's own options bound to config: its flags, and the only task fields of its
  // checkpoints' /config and config files.
  std::vector<ConfigField> (*fields)(TaskConfig& config);
  // Builds the task; throws ConfigError naming the flag for a bad option.
  std::shared_ptr<Task> (*make)(const TaskConfig& config);
  // The marker of a program's own data (a train::DataSource of its own): the task of a
  // checkpoint that a program wrote for a built-in model. Its checkpoint holds the model's
  // fields, not a run's (no optimizer, schedule or loop), and no data: gradlab train cannot
  // run it and eval has no held-out set to score; predict and attention read raw token ids.
  bool own_data = false;
  // Sets the options whose default for this kind differs from the shared flag's (mqar's
  // --symbols), unless given(key) says the user chose them; null when there are none.
  void (*own_defaults)(TaskConfig& config,
                       const std::function<bool(const char* key)>& given) = nullptr;
};

const std::vector<TaskKind>& task_kinds();

// The row of config.name; throws ConfigError "task: unknown task 'x' (expected copy, ...)".
const TaskKind& task_kind(const std::string& name);
// "copy, reverse, sort, recall, text or mqar": the names of the rows gradlab train can run, in
// order.
std::string task_names();
// The row that marks a program's own data (TaskKind::own_data).
const TaskKind& own_data_kind();

// The own defaults of config's kind (TaskKind::own_defaults), for a run whose options came
// from flags or a config file; given(key): the user set that option. Nothing for an unknown
// name (make_task refuses it).
void apply_own_defaults(TaskConfig& config, const std::function<bool(const char* key)>& given);

// The task config names, its options checked.
std::shared_ptr<Task> make_task(const TaskConfig& config);
// The fields of config's own kind (the task's part of /config).
std::vector<ConfigField> own_task_fields(TaskConfig& config);
// The fields of every kind, each key once, in table order: what the command line accepts.
std::vector<ConfigField> all_task_fields(TaskConfig& config);

}  // namespace gradlab::data
