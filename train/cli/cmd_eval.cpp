// `gradlab eval`: a checkpoint's metrics on its task's held-out set.
#include <omp.h>

#include <cstdio>

#include "train/cli/checkpoint_args.h"
#include "train/cli/commands.h"
#include "train/trainer.h"

namespace gradlab::cli {
namespace {

constexpr const char* kCaption =
    "gradlab eval: metrics of a checkpoint on the held-out set\nOptions";

int parse(const std::vector<std::string>& args, CheckpointArgs& a) {
  return parse_with_checkpoint("eval", args, a);
}

}  // namespace

int parse_eval(const std::vector<std::string>& args) {
  CheckpointArgs a(kCaption);
  return parse(args, a);
}

int run_eval(const std::vector<std::string>& args) {
  CheckpointArgs a(kCaption);
  if (const int code = parse(args, a); code >= 0) return code;
  omp_set_num_threads(static_cast<int>(a.threads));
  const train::LoadedRun run = train::load_run(a.checkpoint);
  const train::Metrics m = run.trainer->evaluate();
  std::printf(
      "checkpoint %s (step %lld, task %s, %lld held-out sequences)\n"
      "loss %.6f\ntoken accuracy %.4f\nexact match %.4f\n",
      a.checkpoint.c_str(), static_cast<long long>(run.trainer->step()),
      run.config.task.name.c_str(), static_cast<long long>(run.config.eval_size), m.loss,
      m.token_accuracy, m.exact_match);
  return kExitOk;
}

}  // namespace gradlab::cli
