// `gradlab gradcheck`: the numerical gradient check of every registered op, as a table.
#include <algorithm>
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>

#include "autograd/format.h"
#include "autograd/op_checks.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "nn/module_checks.h"

namespace gradlab::cli {

namespace {

namespace po = boost::program_options;

struct GradcheckArgs {
  GradcheckArgs() {
    add_help_option(options);
    options.add_options()("op", po::value(&only),
                          "check only this op or module (default: all of them)")(
        "seed", po::value(&seed)->default_value(0), "seed for the random inputs");
  }
  po::options_description options{
      "gradlab gradcheck: compare analytic gradients with central differences in "
      "float64\nOptions"};
  std::string only;
  uint64_t seed = 0;
};

int parse_gradcheck(const Arguments& args, GradcheckArgs& a) {
  po::variables_map vm;
  if (const int code = parse_or_usage("gradcheck", args, a.options, vm); code >= 0) return code;
  const std::string& only = a.only;

  const bool known = only.empty() ||
                     std::any_of(op_checks().begin(), op_checks().end(),
                                 [&](const OpCheck& c) { return c.name == only; }) ||
                     std::any_of(nn::module_checks().begin(), nn::module_checks().end(),
                                 [&](const nn::ModuleCheck& c) { return c.name == only; });
  if (!known) return usage_error("gradcheck", "unknown op or module " + quote(only), a.options);
  return -1;
}

int run_gradcheck(GradcheckArgs& a) {
  const std::string& only = a.only;
  const uint64_t seed = a.seed;

  bool all_passed = true;
  std::printf("%-40s %-34s %12s %12s  %s\n", "op", "input shapes", "max abs err", "max rel err",
              "result");
  for (const OpCheck& check : op_checks()) {
    if (!only.empty() && check.name != only) continue;
    Generator gen(seed);
    const std::vector<Tensor> inputs = check.make_inputs(gen);
    std::string shapes;
    for (const Tensor& t : inputs) {
      if (!shapes.empty()) shapes += ' ';
      shapes += to_string(t.shape());
    }
    GradcheckOptions opts = check.options;
    opts.seed = seed;
    const GradcheckReport report = gradcheck(check.fn, inputs, opts);
    all_passed = all_passed && report.passed();
    std::printf("%-40s %-34s %12.3e %12.3e  %s\n", check.name.c_str(), shapes.c_str(),
                report.max_abs_error(), report.max_rel_error(), report.passed() ? "PASS" : "FAIL");
  }
  for (const nn::ModuleCheck& check : nn::module_checks()) {
    if (!only.empty() && check.name != only) continue;
    const GradcheckReport report = check.run(seed);
    all_passed = all_passed && report.passed();
    std::printf("%-40s %-34s %12.3e %12.3e  %s\n", check.name.c_str(), check.sizes.c_str(),
                report.max_abs_error(), report.max_rel_error(), report.passed() ? "PASS" : "FAIL");
  }
  return all_passed ? kExitOk : kExitFailure;
}

const CommandRow gradcheck_row{"gradcheck",
                               "check every op's gradient against central differences",
                               {},
                               parse_gradcheck,
                               run_gradcheck};

}  // namespace

}  // namespace gradlab::cli
