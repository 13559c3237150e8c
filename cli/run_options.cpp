#include "cli/run_options.h"

#include <algorithm>

#include "autograd/format.h"
#include "data/tasks.h"

namespace gradlab::cli {

namespace po = boost::program_options;

void add_run_options(po::options_description& options, train::RunConfig& config) {
  for (const train::ConfigField& f : train::config_fields(config)) {
    if (!f.flag) continue;
    std::visit(
        [&]<class P>(P* p) {
          if constexpr (std::is_same_v<P, bool>) {
            options.add_options()(f.key, po::value(p)->default_value(*p)->implicit_value(true),
                                  f.help);
          } else if constexpr (std::is_same_v<P, std::string>) {
            options.add_options()(f.key, po::value(p)->default_value(*p), f.help);
          } else {
            options.add_options()(f.key, po::value(p)->default_value(*p, format_number(*p)),
                                  f.help);
          }
        },
        f.value);
    if (f.old_key) {
      // Not bound to the field: the new name's default would overwrite it (the variables are
      // notified in key order). apply_old_names copies it.
      std::visit(
          [&]<class P>(P*) {
            options.add_options()(f.old_key, po::value<P>(),
                                  ("the old name of --" + std::string(f.key)).c_str());
          },
          f.value);
    }
  }
  options.add_options()("out", po::value(&config.out_dir),
                        "run directory (default runs/<task>-<timestamp>)");
}

void apply_old_names(const po::variables_map& vm, train::RunConfig& config) {
  for (const train::ConfigField& f : train::config_fields(config)) {
    if (!f.old_key || !vm.count(f.old_key)) continue;
    if (vm.count(f.key) && !vm[f.key].defaulted()) continue;  // the new name was given
    std::visit([&]<class P>(P* p) { *p = vm[f.old_key].as<P>(); }, f.value);
  }
}

std::string as_typed(std::string reason, const po::variables_map& vm, train::RunConfig& config) {
  for (const train::ConfigField& f : train::config_fields(config)) {
    if (!f.old_key || !vm.count(f.old_key)) continue;
    if (vm.count(f.key) && !vm[f.key].defaulted()) continue;
    const std::string given = "--" + std::string(f.key), typed = "--" + std::string(f.old_key);
    for (size_t at = reason.find(given); at != std::string::npos;
         at = reason.find(given, at + typed.size())) {
      reason.replace(at, given.size(), typed);
    }
  }
  return reason;
}

void apply_task_defaults(const po::variables_map& vm, train::RunConfig& config) {
  data::apply_own_defaults(config.task,
                           [&](const char* key) { return vm.count(key) && !vm[key].defaulted(); });
}

namespace {

// "--task text and mqar": the tasks whose rows read the option key.
std::string tasks_reading(const std::string& key) {
  std::vector<std::string> names;
  for (const data::TaskKind& kind : data::task_kinds()) {
    if (kind.own_data) continue;
    data::TaskConfig unused;
    for (const data::ConfigField& f : kind.fields(unused)) {
      if (key == f.key) names.emplace_back(kind.name);
    }
  }
  return "--task " + name_list(names);
}

bool same_value(const data::ConfigField& a, const data::ConfigField& b) {
  return std::visit([&]<class P>(P* p) { return *p == *std::get<P*>(b.value); }, a.value);
}

}  // namespace

std::string option_of_another_task(const po::variables_map& vm,
                                   const std::set<std::string>& command_line,
                                   const std::string& config_file, train::RunConfig config) {
  train::RunConfig defaults;
  const std::vector<data::ConfigField> own = data::own_task_fields(config.task);
  const std::vector<data::ConfigField> all = data::all_task_fields(config.task);
  const std::vector<data::ConfigField> all_defaults = data::all_task_fields(defaults.task);
  std::string own_flags;
  for (const data::ConfigField& f : own) {
    if (f.flag) own_flags += (own_flags.empty() ? "--" : ", --") + std::string(f.key);
  }
  const std::string task = config.task.name;
  for (size_t i = 0; i < all.size(); ++i) {
    const std::string key = all[i].key;
    const bool read = std::any_of(own.begin(), own.end(),
                                  [&](const data::ConfigField& f) { return key == f.key; });
    if (read || !vm.count(key) || vm[key].defaulted()) continue;
    const std::string why = " is an option of " + tasks_reading(key) + ", not of " + task +
                            " (whose options are " + own_flags + ")";
    if (command_line.count(key)) return "--" + key + why;
    if (!same_value(all[i], all_defaults[i])) return config_file + ": " + key + why;
  }
  return "";
}

}  // namespace gradlab::cli
