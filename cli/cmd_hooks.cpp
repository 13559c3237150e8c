// `gradlab hooks`: the hook points of a checkpoint's model, in the order a forward pass meets
// them, with their shapes in the tutorial's letters ([B, T, C], [B, H, Tq, Tk]) and in the model's
// sizes.
#include <cstdio>
#include <sstream>

#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "nn/hooks.h"

namespace gradlab::cli {
namespace {

struct HooksArgs : CheckpointArgs {
  HooksArgs()
      : CheckpointArgs(
            "gradlab hooks: the hook points of a checkpoint's model (docs/hooks.md)\nOptions") {
    add_checkpoint_options(*this);
  }
};

// "[B, Tk, KV, D]" with the sizes the model fixes: "[B, Tk, 2, 16]".
std::string with_sizes(const std::string& letters, const nn::ModelConfig& config) {
  const int64_t kv = config.attention.num_kv_heads == 0 ? config.attention.num_heads
                                                        : config.attention.num_kv_heads;
  const std::map<std::string, int64_t> sizes{{"H", config.attention.num_heads},
                                             {"KV", kv},
                                             {"D", config.d_model / config.attention.num_heads},
                                             {"C", config.d_model},
                                             {"F", config.feed_forward.d_ff},
                                             {"V", config.vocab_size}};
  std::string out = "[";
  std::istringstream axes(letters.substr(1, letters.size() - 2));
  for (std::string axis; std::getline(axes >> std::ws, axis, ',');) {
    const auto size = sizes.find(axis);
    out +=
        (out.size() > 1 ? ", " : "") + (size == sizes.end() ? axis : std::to_string(size->second));
  }
  return out + "]";
}

int parse_hooks(const Arguments& args, HooksArgs& a) {
  return parse_with_checkpoint("hooks", args, a);
}

int run_hooks(HooksArgs& a) {
  const train::TrainedModel trained = load_trained(a);
  const nn::SequenceModel& model = *trained.model;
  // Any sequence lists the points: one of three tokens (a prompt token, a separator, an answer).
  const nn::SequenceBatch batch = model.make_batch(Indices({1, 3}, {0, 0, 0}), 1);
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, batch);
  size_t width = 0;
  for (const nn::HookPointInfo& point : points) width = std::max(width, point.name.size());
  std::printf("%zu hook points of %s (B sequences, T positions; S source positions)\n",
              points.size(), a.checkpoint.c_str());
  for (const nn::HookPointInfo& point : points) {
    std::printf("  %-*s  %-16s %s\n", static_cast<int>(width), point.name.c_str(),
                point.letters.c_str(), with_sizes(point.letters, model.config()).c_str());
  }
  return kExitOk;
}

const CommandRow hooks_row{"hooks",
                           "the hook points of a checkpoint's model, with their shapes",
                           {"--checkpoint"},
                           parse_hooks,
                           run_hooks};

}  // namespace

}  // namespace gradlab::cli
