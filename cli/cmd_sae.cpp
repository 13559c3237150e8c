// `gradlab sae train|eval|features`: sparse autoencoders on a checkpoint's hook point
// (interp/sae.h): trained on the activations of the model's own training batches, evaluated over
// its held-out sequences (L0, explained variance, the CE loss score), and each feature's
// top-activating examples and logit effect.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "autograd/error.h"
#include "autograd/format.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "interp/files/sae_file.h"
#include "interp/sae_model.h"
#include "interp/sae_run.h"
#include "nn/module.h"
#include "train/trained_model.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct SaeArgs {
  SaeArgs() {
    checkpoint.options.add_options()(
        "hook", po::value(&config.hook),
        "train: the hook point read, of shape [B, T, C] (gradlab hooks lists them)")(
        "d-sae", po::value(&config.d_sae), "train: features (the SAE's width)")(
        "l1", po::value(&config.l1_coefficient)->default_value(1.0),
        "train: the L1 coefficient (SAELens's default); with --top-k the L1 term is reported, "
        "not trained on")("lr", po::value(&training.lr)->default_value(3e-4, "3e-4"),
                          "train: Adam's learning rate (SAELens's default)")(
        "top-k", po::value(&config.top_k)->default_value(0),
        "train: a TopK SAE keeping each input's K largest pre-activations (0: ReLU and L1)")(
        "steps", po::value(&training.steps)->default_value(1000), "train: optimizer steps")(
        "batch-size", po::value(&batch_size)->default_value(0),
        "train: sequences of the model's training batches per step, all their positions the "
        "SAE's inputs (0: the checkpoint's batch size)")(
        "log-every", po::value(&training.log_every)->default_value(100),
        "train: a row of metrics.csv (with a held-out evaluation) every this many steps")(
        "dead-window", po::value(&training.dead_window)->default_value(1000),
        "train: a feature that fired on no input over this many steps is dead (SAELens's "
        "dead_feature_window)")(
        "resample-every", po::value(&training.resample_every)->default_value(2000),
        "train: re-initialise the dead features every this many steps (0: never)")(
        "seed", po::value(&config.seed)->default_value(0), "train: the SAE's initialisation")(
        "sae", po::value(&sae_file), "eval, features: the SAE's file (sae.h5 of sae train)")(
        "held-out", po::value(&held_out)->default_value(0),
        "eval, features: the first N of the checkpoint's held-out sequences (0: all)")(
        "top", po::value(&top)->default_value(10), "features: features shown, most frequent first")(
        "examples", po::value(&examples)->default_value(5),
        "features: top-activating examples per feature")(
        "tokens", po::value(&tokens)->default_value(5),
        "features: tokens of each feature's logit effect");
    add_output_options(checkpoint, {.help = "train: the run's directory (a new one): sae.h5 and "
                                            "metrics.csv",
                                    .required = false});
    add_checkpoint_options(checkpoint);
  }
  CheckpointArgs checkpoint{
      "gradlab sae: sparse autoencoders on a checkpoint's hook point: sae train trains one, sae "
      "eval evaluates one over held-out sequences, sae features lists its features "
      "(docs/experiments.md)\n"
      "Options"};
  const po::options_description& options = checkpoint.options;
  std::string action, sae_file;
  interp::SaeConfig config;
  interp::SaeTrainingOptions training;
  int64_t batch_size = 0, held_out = 0, top = 10, examples = 5, tokens = 5;
};

// The subcommands each flag of SaeArgs' own applies to.
const std::map<std::string, std::set<std::string>>& flag_actions() {
  static const std::map<std::string, std::set<std::string>> table{
      {"hook", {"train"}},
      {"d-sae", {"train"}},
      {"l1", {"train"}},
      {"lr", {"train"}},
      {"top-k", {"train"}},
      {"steps", {"train"}},
      {"batch-size", {"train"}},
      {"log-every", {"train"}},
      {"dead-window", {"train"}},
      {"resample-every", {"train"}},
      {"seed", {"train"}},
      {"out", {"train"}},
      {"overwrite", {"train"}},
      {"sae", {"eval", "features"}},
      {"held-out", {"eval", "features"}},
      {"top", {"features"}},
      {"examples", {"features"}},
      {"tokens", {"features"}}};
  return table;
}

int check_positive(const SaeArgs& a, const std::string& flag, int64_t value) {
  if (value >= 1) return -1;
  return usage_error("sae", "--" + flag + " " + format_number(value) + " must be at least 1",
                     a.options);
}

// Refuses an --out directory that holds anything, unless --overwrite.
int check_out_dir(const SaeArgs& a) {
  const std::filesystem::path out = a.checkpoint.out;
  std::error_code error;
  if (!std::filesystem::exists(out, error)) return -1;
  if (!std::filesystem::is_directory(out, error)) {
    return usage_error("sae", "--out " + out.string() + " exists and is not a directory",
                       a.options);
  }
  if (!std::filesystem::is_empty(out, error) && !a.checkpoint.overwrite) {
    return usage_error("sae",
                       "--out " + out.string() +
                           " already holds files; pass --overwrite to "
                           "replace its sae.h5 and metrics.csv",
                       a.options);
  }
  return -1;
}

int parse_sae(const Arguments& args, SaeArgs& a) {
  Arguments rest = args;
  if (!rest.empty() && rest.front().rfind("-", 0) != 0) {
    a.action = rest.front();
    rest.erase(rest.begin());
  }
  CheckpointArgs& c = a.checkpoint;
  if (const int code = parse_with_checkpoint("sae", rest, c); code >= 0) return code;
  if (a.action != "train" && a.action != "eval" && a.action != "features") {
    return usage_error("sae",
                       (a.action.empty() ? std::string("no subcommand")
                                         : "unknown subcommand " + quote(a.action)) +
                           ": give train, eval or features",
                       a.options);
  }
  for (const auto& [flag, actions] : flag_actions()) {
    if (!c.vm.count(flag) || c.vm[flag].defaulted() || actions.count(a.action)) continue;
    std::string names;
    for (const std::string& action : actions) names += (names.empty() ? "" : ", ") + action;
    return usage_error("sae", "--" + flag + " applies to sae " + names + ", not " + a.action,
                       a.options);
  }
  if (a.action == "train") {
    for (const char* flag : {"hook", "d-sae", "out"}) {
      if (!c.vm.count(flag)) {
        return usage_error("sae", "sae train needs --" + std::string(flag), a.options);
      }
    }
    if (c.overwrite && c.out.empty()) {
      return usage_error("sae", "--overwrite replaces an --out; none is given", a.options);
    }
    try {
      interp::check_sae_config({.d_in = 1,
                                .d_sae = a.config.d_sae,
                                .l1_coefficient = a.config.l1_coefficient,
                                .top_k = a.config.top_k});
    } catch (const ConfigError& e) {
      return usage_error("sae", e.what(), a.options);
    }
    if (!(a.training.lr > 0)) return usage_error("sae", "--lr must be above 0", a.options);
    for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"steps", a.training.steps},
                                      {"log-every", a.training.log_every},
                                      {"dead-window", a.training.dead_window}}) {
      if (const int code = check_positive(a, flag, value); code >= 0) return code;
    }
    for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"batch-size", a.batch_size},
                                      {"resample-every", a.training.resample_every}}) {
      if (value < 0) {
        return usage_error("sae", "--" + std::string(flag) + " must be at least 0", a.options);
      }
    }
    return check_out_dir(a);
  }
  if (!c.vm.count("sae")) return usage_error("sae", "sae " + a.action + " needs --sae", a.options);
  if (const int code = check_input_file("sae", "--sae", a.sae_file, a.options); code >= 0) {
    return code;
  }
  if (a.held_out < 0) return usage_error("sae", "--held-out must be at least 0", a.options);
  for (const auto& [flag, value] : {std::pair<const char*, int64_t>{"top", a.top},
                                    {"examples", a.examples},
                                    {"tokens", a.tokens}}) {
    if (const int code = check_positive(a, flag, value); code >= 0) return code;
  }
  return -1;
}

// The checkpoint's held-out sequences (the first --held-out of them), as its task makes them.
nn::SequenceBatch heldout_of(const train::TrainedModel& trained, int64_t rows) {
  const train::RunConfig& config = trained.config;
  const nn::SequenceBatch all =
      trained.task->data_source(trained.model, config.seed, config.batch_size, config.eval_size)
          ->heldout();
  const int64_t available = all.inputs.shape.at(0);
  return rows > 0 && rows < available ? rows_of(all, 0, rows) : all;
}

void print_evaluation(const interp::SaeEvaluation& e) {
  std::printf(
      "over %lld inputs: L0 %.3f, explained variance %.4f, MSE %.6g, L1 %.6g, dead features %lld\n"
      "CE loss: clean %.5f, zero-ablated %.5f, with the SAE %.5f: CE loss score %.4f\n",
      static_cast<long long>(e.inputs), e.metrics.l0, e.metrics.explained_variance, e.metrics.mse,
      e.metrics.l1, static_cast<long long>(e.dead), e.ce_clean, e.ce_zero, e.ce_sae, e.ce_score);
}

// Tokens as the model reads them: a language model's characters, quoted, or a toy task's ids.
std::string token_text(const train::TrainedModel& trained, const std::vector<int64_t>& ids) {
  if (!trained.vocabulary) return join(ids);
  std::string text;
  for (const int64_t id : ids) text += trained.vocabulary->decode(id);
  return quote(one_line(text));
}

int run_train(SaeArgs& a) {
  const train::TrainedModel trained = load_trained(a.checkpoint);
  const std::filesystem::path dir = a.checkpoint.out;
  const auto report = [](const interp::SaeStepLog& s, const interp::SaeEvaluation& h) {
    std::printf(
        "step %lld: loss %.6g, L0 %.3f, explained variance %.4f, dead %lld%s; held-out CE loss "
        "score %.4f\n",
        static_cast<long long>(s.step), s.batch.loss, s.batch.l0, s.batch.explained_variance,
        static_cast<long long>(s.dead),
        s.resampled > 0 ? (", resampled " + std::to_string(s.resampled)).c_str() : "", h.ce_score);
  };
  try {
    interp::train_sae_on_checkpoint(trained, a.config, a.training, a.batch_size, dir, report);
  } catch (const ConfigError& e) {
    return usage_error("sae", std::string("--hook: ") + e.what(), a.options);
  }
  std::printf(
      "trained a %s SAE of %lld features on %s for %lld steps: wrote %s and %s\n",
      a.config.top_k > 0 ? ("TopK (k " + std::to_string(a.config.top_k) + ")").c_str() : "ReLU",
      static_cast<long long>(a.config.d_sae), a.config.hook.c_str(),
      static_cast<long long>(a.training.steps), (dir / "sae.h5").c_str(),
      (dir / "metrics.csv").c_str());
  return kExitOk;
}

// The SAE of --sae, checked against the checkpoint's model: -1, or the usage error.
int load_fitting_sae(const SaeArgs& a, const train::TrainedModel& trained,
                     const nn::SequenceBatch& heldout, std::shared_ptr<interp::Sae>& sae) {
  sae = interp::read_sae_file(a.sae_file);
  try {
    interp::check_sae_fits(*trained.model, *sae, heldout, "--sae " + a.sae_file);
  } catch (const ConfigError& e) {
    return usage_error("sae", e.what(), a.options);
  }
  return -1;
}

int run_eval(SaeArgs& a) {
  const train::TrainedModel trained = load_trained(a.checkpoint);
  nn::EvalScope eval(*trained.model);
  const nn::SequenceBatch heldout = heldout_of(trained, a.held_out);
  std::shared_ptr<interp::Sae> sae;
  if (const int code = load_fitting_sae(a, trained, heldout, sae); code >= 0) return code;
  std::printf("SAE %s: %lld features on %s, over %lld held-out sequences\n", a.sae_file.c_str(),
              static_cast<long long>(sae->config().d_sae), sae->config().hook.c_str(),
              static_cast<long long>(heldout.inputs.shape.at(0)));
  print_evaluation(interp::evaluate_sae(*trained.model, *sae, heldout, interp::kSaeRowsPerPass));
  return kExitOk;
}

int run_features(SaeArgs& a) {
  const train::TrainedModel trained = load_trained(a.checkpoint);
  nn::EvalScope eval(*trained.model);
  const nn::SequenceBatch heldout = heldout_of(trained, a.held_out);
  std::shared_ptr<interp::Sae> sae;
  if (const int code = load_fitting_sae(a, trained, heldout, sae); code >= 0) return code;
  const std::vector<interp::FeatureSummary> features = interp::sae_features(
      *trained.model, *sae, heldout, interp::kSaeRowsPerPass, a.examples, a.tokens);
  const int64_t positions = heldout.inputs.shape.at(1);
  int64_t shown = 0;
  for (const interp::FeatureSummary& f : features) {
    if (shown++ == a.top) break;
    std::printf("feature %lld: active on %.2f%% of %lld inputs\n",
                static_cast<long long>(f.feature), 100 * f.frequency,
                static_cast<long long>(heldout.inputs.shape.at(0) * positions));
    for (const interp::FeatureExample& e : f.top) {
      const auto begin = heldout.inputs.values.begin() + e.sequence * positions;
      const std::vector<int64_t> read(begin, begin + e.position + 1);
      std::printf("  %.4f  sequence %lld position %lld: %s\n", e.activation,
                  static_cast<long long>(e.sequence), static_cast<long long>(e.position),
                  token_text(trained, read).c_str());
    }
    if (f.logit_effect.empty()) {
      std::printf("  logit effect: none (%s is not the residual stream's width)\n",
                  sae->config().hook.c_str());
      continue;
    }
    std::string effect;
    for (const auto& [token, logit] : f.logit_effect) {
      effect +=
          (effect.empty() ? "" : ", ") + token_text(trained, {token}) + " " + format_number(logit);
    }
    std::printf("  logit effect: %s\n", effect.c_str());
  }
  return kExitOk;
}

int run_sae(SaeArgs& a) {
  if (a.action == "train") return run_train(a);
  if (a.action == "eval") return run_eval(a);
  return run_features(a);
}

const CommandRow sae_row{"sae",
                         "sparse autoencoders on a hook point: train one, evaluate it, list its "
                         "features",
                         {"--batch-size", "--d-sae"},
                         parse_sae,
                         run_sae};

}  // namespace

}  // namespace gradlab::cli
