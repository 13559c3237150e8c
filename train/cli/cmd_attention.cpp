// `gradlab attention`: every layer's and head's attention weights for one prompt, to HDF5.
#include <cstdio>
#include <filesystem>

#include "autograd/graph.h"
#include "train/checkpoint.h"
#include "train/cli/checkpoint_args.h"
#include "train/cli/commands.h"
#include "train/cli/options.h"
#include "train/io/attention_file.h"
#include "train/trainer.h"

namespace gradlab::cli {
namespace {

namespace fs = std::filesystem;
namespace po = boost::program_options;

// Why --out may not be written, or "": an existing file is replaced only with --overwrite, and
// a checkpoint (the one read, or any other) never.
std::string refuse_output(const CheckpointArgs& a) {
  std::error_code error;
  if (!fs::exists(a.out, error)) return "";
  const std::string out = "--out " + a.out;
  if (fs::equivalent(a.out, a.checkpoint, error)) return out + " is the checkpoint being read";
  if (!fs::is_regular_file(a.out, error)) return out + " exists and is not a regular file";
  try {
    train::read_checkpoint_config(a.out);
    return out + " is a checkpoint; write the attention weights to a file of their own";
  } catch (const CheckpointError&) {
    // not a checkpoint (an earlier attention file, say)
  }
  return a.overwrite ? "" : out + " already exists; pass --overwrite to replace it";
}

constexpr const char* kAttentionCaption =
    "gradlab attention: attention weights of every layer and head for one prompt\nOptions";

int parse_attention_options(const std::vector<std::string>& args, CheckpointArgs& a) {
  a.options.add_options()("input", po::value(&a.input)->required(), kInputHelp)(
      "out", po::value(&a.out)->required(), "output HDF5 file (a new one)")(
      "overwrite", po::bool_switch(&a.overwrite),
      "replace --out if it exists (never a checkpoint)");
  if (const int code = parse_with_checkpoint("attention", args, a); code >= 0) return code;
  if (const std::string refusal = refuse_output(a); !refusal.empty()) {
    return usage_error("attention", refusal, a.options);
  }
  return -1;
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
  const PromptedRun& run = *loaded;
  // The model reads the prompt, the separator and its own greedy answer, as in training.
  nn::SequenceModel& model = *run.loaded.model;
  const std::vector<int64_t> answer =
      model.greedy_decode(run.prompt, run.separator, run.answer_length);
  std::vector<int64_t> sample = run.prompt;
  sample.push_back(run.separator);
  sample.insert(sample.end(), answer.begin(), answer.end());
  const nn::SequenceBatch batch =
      model.make_batch(Indices({1, static_cast<int64_t>(sample.size())}, sample),
                       static_cast<int64_t>(run.prompt.size()));
  nn::AttentionMaps maps;
  {
    NoGradGuard no_grad;
    model.eval();
    model.forward(batch, &maps);
    model.train();
  }
  train::write_attention_file(a.out, batch, answer, maps);
  std::printf("wrote %zu layers of attention weights to %s\n",
              maps.encoder_self.size() + maps.decoder_self.size() + maps.decoder_cross.size(),
              a.out.c_str());
  return kExitOk;
}

}  // namespace gradlab::cli
