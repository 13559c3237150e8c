// `gradlab attention`: every layer's and head's attention weights for one prompt, to HDF5.
#include <cstdio>

#include "autograd/graph.h"
#include "cli/checkpoint_args.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "interp/files/attention_file.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

constexpr const char* kAttentionCaption =
    "gradlab attention: attention weights of every layer and head for one prompt\nOptions";

int parse_attention_options(const std::vector<std::string>& args, CheckpointArgs& a) {
  add_prompt_options(a);
  return parse_with_output("attention", args, a, "the attention weights");
}

}  // namespace

int parse_attention(const std::vector<std::string>& args) {
  CheckpointArgs a(kAttentionCaption);
  return parse_attention_options(args, a);
}

int run_attention(const std::vector<std::string>& args) {
  CheckpointArgs a(kAttentionCaption);
  if (const int code = parse_attention_options(args, a); code >= 0) return code;
  std::optional<PromptedRun> loaded;
  if (const int code = load_prompted_run("attention", a, loaded); code >= 0) return code;
  nn::SequenceModel& model = *loaded->loaded.model;
  std::vector<int64_t> answer;
  const nn::SequenceBatch batch = answered_batch(*loaded, answer);
  if (const int code = refuse_weights_above_limit("attention", a, *loaded, batch); code >= 0) {
    return code;
  }
  nn::AttentionMaps maps;
  {
    NoGradGuard no_grad;
    model.eval();
    model.forward(batch, &maps);
    model.train();
  }
  interp::write_attention_file(a.out, batch, answer, maps);
  std::printf("wrote %zu layers of attention weights to %s\n",
              maps.encoder_self.size() + maps.decoder_self.size() + maps.decoder_cross.size(),
              a.out.c_str());
  return kExitOk;
}

}  // namespace gradlab::cli
