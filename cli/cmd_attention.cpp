// `gradlab attention`: every layer's and head's attention weights for one prompt, to HDF5.
#include <cstdio>

#include "autograd/graph.h"
#include "cli/checkpoint_args.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "interp/files/attention_file.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

struct AttentionArgs : CheckpointArgs {
  AttentionArgs()
      : CheckpointArgs(
            "gradlab attention: attention weights of every layer and head for one "
            "prompt\nOptions") {
    add_prompt_options(*this);
    add_output_options(*this);
    add_checkpoint_options(*this);
  }
};

int parse_attention(const Arguments& args, AttentionArgs& a) {
  return parse_with_output("attention", args, a, "the attention weights");
}

int run_attention(AttentionArgs& a) {
  std::optional<PromptedRun> loaded;
  if (const int code = load_prompted_run("attention", a, loaded); code >= 0) return code;
  nn::SequenceModel& model = *loaded->trained.model;
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

const CommandRow attention_row{"attention",
                               "attention weights of every layer and head, to HDF5",
                               {"--checkpoint"},
                               parse_attention,
                               run_attention};

}  // namespace

}  // namespace gradlab::cli
