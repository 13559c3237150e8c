#include "train/cli/run_options.h"

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

void apply_task_defaults(const po::variables_map& vm, train::RunConfig& config) {
  data::apply_own_defaults(config.task,
                           [&](const char* key) { return vm.count(key) && !vm[key].defaulted(); });
}

}  // namespace gradlab::cli
