// The factories of the built-in tasks, one per row of task_kinds() (data/tasks.cpp), each
// defined in its task's own file.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "data/task.h"

namespace gradlab::data {

std::shared_ptr<Task> make_copy_task(const TaskConfig& config);          // copy_task.cpp
std::shared_ptr<Task> make_reverse_task(const TaskConfig& config);       // copy_task.cpp
std::shared_ptr<Task> make_sort_task(const TaskConfig& config);          // copy_task.cpp
std::shared_ptr<Task> make_recall_task(const TaskConfig& config);        // recall_task.cpp
std::shared_ptr<Task> make_mqar_task(const TaskConfig& config);          // mqar_task.cpp
std::shared_ptr<Task> make_text_task(const TaskConfig& config);          // text_task.cpp
std::shared_ptr<Task> make_modular_task(const TaskConfig& config);       // modular_task.cpp
std::shared_ptr<Task> make_induction_task(const TaskConfig& config);     // induction_task.cpp
std::shared_ptr<Task> make_program_data_task(const TaskConfig& config);  // program_data.cpp
std::shared_ptr<Task> make_tms_task(const TaskConfig& config);           // tms_task.cpp

std::vector<ConfigField> sequence_task_fields(TaskConfig& config);  // sequence_task.cpp
std::vector<ConfigField> mqar_task_fields(TaskConfig& config);      // mqar_task.cpp
std::vector<ConfigField> text_task_fields(TaskConfig& config);      // text_task.cpp
std::vector<ConfigField> modular_task_fields(TaskConfig& config);   // modular_task.cpp
std::vector<ConfigField> program_data_fields(TaskConfig& config);   // program_data.cpp
std::vector<ConfigField> tms_task_fields(TaskConfig& config);       // tms_task.cpp

void mqar_own_defaults(TaskConfig& config,
                       const std::function<bool(const char* key)>& given);  // mqar_task.cpp

}  // namespace gradlab::data
