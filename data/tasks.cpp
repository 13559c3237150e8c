// The rows of the task table, and the look-ups every user of a task goes through.
#include "data/tasks.h"

#include <algorithm>
#include <cstring>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/kinds.h"
#include "data/task_rows.h"

namespace gradlab::data {

const std::vector<TaskKind>& task_kinds() {
  static const std::vector<TaskKind> kinds{
      {"copy", "repeat the prompt after the separator", sequence_task_fields, make_copy_task},
      {"reverse", "the prompt backwards", sequence_task_fields, make_reverse_task},
      {"sort", "the prompt's symbols in ascending order", sequence_task_fields, make_sort_task},
      {"recall", "key-value pairs then a key: answer its value", sequence_task_fields,
       make_recall_task},
      {"text", "a character- or byte-level language model on a file (--data)", text_task_fields,
       make_text_task},
  };
  return kinds;
}

std::string task_names() {
  return names_of(task_kinds());
}

const TaskKind& task_kind(const std::string& name) {
  return row_named(task_kinds(), name, "task", "task: ");
}

std::unique_ptr<Task> make_task(const TaskConfig& config) {
  return task_kind(config.name).make(config);
}

std::vector<ConfigField> own_task_fields(TaskConfig& config) {
  return task_kind(config.name).fields(config);
}

std::vector<ConfigField> all_task_fields(TaskConfig& config) {
  std::vector<ConfigField> fields;
  for (const TaskKind& kind : task_kinds()) {
    for (const ConfigField& f : kind.fields(config)) {
      const bool known = std::any_of(fields.begin(), fields.end(), [&](const ConfigField& g) {
        return std::strcmp(f.key, g.key) == 0;
      });
      if (!known) fields.push_back(f);
    }
  }
  return fields;
}

}  // namespace gradlab::data
