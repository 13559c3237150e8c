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
      {"modular", "a b = (a op b) mod P, trained on a fixed part of the P^2 pairs (grokking)",
       modular_task_fields, make_modular_task},
      {"mqar", "multi-query associative recall: key-value pairs, then every key queried",
       mqar_task_fields, make_mqar_task, false, mqar_own_defaults},
      {"induction", "a start token, a block of distinct symbols, the block again (induction heads)",
       sequence_task_fields, make_induction_task},
      {"text", "a character- or byte-level language model on a file (--data)", text_task_fields,
       make_text_task},
      {"tms", "feature vectors to squeeze through fewer dimensions (toy models of superposition)",
       tms_task_fields, make_tms_task},
      {"program", "a program's own data (train::DataSource): the model alone is in the file",
       program_data_fields, make_program_data_task, true},
  };
  return kinds;
}

std::string task_names() {
  std::vector<std::string> names;
  for (const TaskKind& kind : task_kinds()) {
    if (!kind.own_data) names.emplace_back(kind.name);
  }
  return name_list(names);
}

const TaskKind& own_data_kind() {
  const std::vector<TaskKind>& kinds = task_kinds();
  return *std::find_if(kinds.begin(), kinds.end(), [](const TaskKind& k) { return k.own_data; });
}

const TaskKind& task_kind(const std::string& name) {
  for (const TaskKind& kind : task_kinds()) {
    if (name == kind.name) return kind;
  }
  // Lists the tasks a run can name: not the row of a program's own data.
  throw ConfigError("task: unknown task " + quote(name) + " (expected " + task_names() + ")");
}

void apply_own_defaults(TaskConfig& config, const std::function<bool(const char* key)>& given) {
  for (const TaskKind& kind : task_kinds()) {
    if (config.name == kind.name && kind.own_defaults) kind.own_defaults(config, given);
  }
}

std::shared_ptr<Task> make_task(const TaskConfig& config) {
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
