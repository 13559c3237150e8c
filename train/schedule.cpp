// The learning-rate schedules (see schedule.h).
#include "train/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/kinds.h"

namespace gradlab::train {

const std::vector<ScheduleKind>& schedule_kinds() {
  static const std::vector<ScheduleKind> kinds{
      {Schedule::Constant, "constant"},
      {Schedule::Cosine, "cosine"},
      {Schedule::Noam, "noam"},
  };
  return kinds;
}

Schedule schedule_named(const std::string& name) {
  return row_named(schedule_kinds(), name, "schedule", "schedule: ").id;
}

const char* schedule_name(Schedule schedule) {
  return row_of(schedule_kinds(), schedule).name;
}

void validate(const ScheduleConfig& config) {
  const Schedule schedule = schedule_named(config.name);
  if (!(config.lr > 0.0) || !std::isfinite(config.lr)) {
    throw ConfigError("schedule: lr must be finite and > 0, got " + format_number(config.lr));
  }
  if (config.warmup_steps < 0) {
    throw ConfigError("schedule: warmup_steps must be >= 0, got " +
                      std::to_string(config.warmup_steps));
  }
  if (schedule == Schedule::Cosine) {
    if (config.total_steps <= 0) {
      throw ConfigError("schedule: total_steps must be > 0, got " +
                        std::to_string(config.total_steps) + " (cosine)");
    }
    if (config.total_steps < config.warmup_steps) {
      throw ConfigError("schedule: total_steps " + std::to_string(config.total_steps) +
                        " is less than warmup_steps " + std::to_string(config.warmup_steps) +
                        " (cosine)");
    }
    if (!(config.min_lr >= 0.0 && config.min_lr <= config.lr)) {
      throw ConfigError("schedule: min_lr must be in [0, lr] = [0, " + format_number(config.lr) +
                        "], got " + format_number(config.min_lr) + " (cosine)");
    }
  }
  if (schedule == Schedule::Noam) {
    if (config.warmup_steps <= 0) {
      throw ConfigError("schedule: noam needs warmup_steps > 0, got " +
                        std::to_string(config.warmup_steps));
    }
    if (config.d_model <= 0) {
      throw ConfigError("schedule: d_model must be > 0, got " + std::to_string(config.d_model) +
                        " (noam)");
    }
  }
}

double learning_rate(const ScheduleConfig& config, int64_t step) {
  validate(config);
  const Schedule schedule = schedule_named(config.name);
  if (step < 1) {
    throw ConfigError("schedule: step must be >= 1 (steps are 1-based), got " +
                      std::to_string(step));
  }
  const double s = static_cast<double>(step);
  const double warmup = static_cast<double>(config.warmup_steps);
  if (schedule == Schedule::Noam) {
    return config.lr * std::pow(static_cast<double>(config.d_model), -0.5) *
           std::min(std::pow(s, -0.5), s * std::pow(warmup, -1.5));
  }
  if (config.warmup_steps > 0 && step < config.warmup_steps) return config.lr * s / warmup;
  if (schedule == Schedule::Constant) return config.lr;
  // Schedule::Cosine
  double progress = 1.0;  // total_steps == warmup_steps: decayed as soon as warm-up ends
  if (config.total_steps > config.warmup_steps) {
    progress = (s - warmup) / static_cast<double>(config.total_steps - config.warmup_steps);
    progress = std::clamp(progress, 0.0, 1.0);
  } else if (step <= config.warmup_steps) {
    progress = 0.0;
  }
  return config.min_lr +
         0.5 * (config.lr - config.min_lr) * (1.0 + std::cos(std::numbers::pi * progress));
}

}  // namespace gradlab::train
