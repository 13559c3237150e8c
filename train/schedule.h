// Learning-rate schedules: one table of kinds (constant, cosine, noam), the one place that
// knows their names, and the learning rate of a step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gradlab::train {

enum class Schedule { Constant, Cosine, Noam };

struct ScheduleKind {
  Schedule id;
  const char* name;  // the --schedule value
};
const std::vector<ScheduleKind>& schedule_kinds();
// The schedule of a --schedule value; throws ConfigError "schedule: unknown schedule 'x'
// (expected constant, cosine or noam)".
Schedule schedule_named(const std::string& name);
const char* schedule_name(Schedule schedule);

struct ScheduleConfig {
  std::string name = schedule_name(Schedule::Constant);  // a row of schedule_kinds()
  double lr = 3e-3;            // peak learning rate (noam: a multiplier of its formula)
  int64_t warmup_steps = 100;  // linear warm-up from lr / warmup_steps to lr
  int64_t total_steps = 3000;  // cosine: decays to min_lr at total_steps
  double min_lr = 0.0;
  int64_t d_model = 64;  // noam: lr * d_model^-0.5 * min(s^-0.5, s * warmup^-1.5)
};

// Learning rate for 1-based step s. constant: linear warm-up to lr, then lr. cosine: the same
// warm-up, then from lr down to min_lr at total_steps along half a cosine, min_lr after it.
// noam: see d_model. Throws ConfigError for an unknown name, bad values or step < 1.
double learning_rate(const ScheduleConfig& config, int64_t step);
void validate(const ScheduleConfig& config);

}  // namespace gradlab::train
