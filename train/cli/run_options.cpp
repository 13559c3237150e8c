#include "train/cli/run_options.h"

#include "autograd/format.h"

namespace gradlab::cli {

namespace po = boost::program_options;

void add_run_options(po::options_description& options, train::RunConfig& config) {
  for (const train::ConfigField& f : train::config_fields(config)) {
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
  }
  options.add_options()("out", po::value(&config.out_dir),
                        "run directory (default runs/<task>-<timestamp>)");
}

}  // namespace gradlab::cli
