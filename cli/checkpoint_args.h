// What the commands that read a checkpoint share: the option groups --checkpoint and --threads,
// --input and --prompt, --out and --overwrite, and reading --input as a prompt of the
// checkpoint's task (or as raw token ids for a checkpoint of a program's own data), or --prompt
// as a language model's text.
#pragma once

#include <boost/program_options.hpp>
#include <optional>
#include <string>
#include <vector>

#include "data/sequence_task.h"
#include "data/text.h"
#include "train/trained_model.h"

namespace gradlab::cli {

// The command line of a command that reads a checkpoint: the options and the values bound to
// them. A command's arguments derive from it and declare their options in their constructor:
// the command's own, then the groups below (add_checkpoint_options last, as --help lists them).
struct CheckpointArgs {
  explicit CheckpointArgs(const char* caption) : options(caption) {}
  CheckpointArgs(const CheckpointArgs&) = delete;  // the options are bound to the members
  boost::program_options::options_description options;
  std::string checkpoint, input, prompt, out;
  int64_t threads = 1;
  bool overwrite = false;   // commands that write a file: replace an existing --out
  bool takes_text = false;  // add_prompt_options: --prompt for a language model
  boost::program_options::variables_map vm;
};

// Adds --help, --checkpoint (required) and --threads.
void add_checkpoint_options(CheckpointArgs& a);

// Parses a.options (add_checkpoint_options' and the command's) and checks --threads and, with
// add_prompt_options, that exactly one of --input and --prompt is given; returns -1 to go on or
// an exit code. Throws CheckpointError if --checkpoint names a special file
// (require_checkpoint_file in options.h).
int parse_with_checkpoint(const std::string& command, const std::vector<std::string>& args,
                          CheckpointArgs& a);

// A checkpoint's model and --input ("3 1 4 1 5") read as what the model decodes from: the
// prompt, the separator that ends it and how many tokens follow. For a sequence task, a prompt
// of that task, whose right answer is known. For a program's own data (data::TaskKind::own_data),
// raw token ids in [0, V): every id but the last is the prompt, the last one ends it (the
// separator), and the model decodes as many tokens as its positions leave room for. For a
// language model, --prompt's text as tokens of the checkpoint's vocabulary (no separator: the
// model reads the text and says one token more).
struct PromptedRun {
  train::TrainedModel trained;
  std::vector<int64_t> prompt;
  int64_t separator = 0;
  int64_t answer_length = 0;
  std::optional<std::vector<int64_t>> expected;  // the task's answer; none for raw ids or text

  bool text() const { return trained.vocabulary.has_value(); }
};

// What --input means, for the help of predict and attention.
extern const char* const kInputHelp;

// Adds --input and --prompt (a language model's text), of which the command takes exactly one:
// parse_with_checkpoint refuses neither or both, load_prompted_run the one the checkpoint does
// not read.
void add_prompt_options(CheckpointArgs& a);

// text as tokens of a language model's vocabulary, for a command's `flag` (--prompt); returns -1
// to go on, or the usage exit code after naming the character the vocabulary lacks.
int encode_prompt(const std::string& command, const std::string& flag,
                  const data::Vocabulary& vocabulary, const std::string& text,
                  const boost::program_options::options_description& options,
                  std::vector<int64_t>& tokens);

// Reads text, given with `flag`, as a prompt of the trained model's task into `loaded`: a
// language model's text, a toy task's prompt, or a program's raw ids; returns -1 to go on, or
// the usage exit code after saying what is wrong with it, naming the flag.
int read_prompt(const std::string& command, const CheckpointArgs& a, train::TrainedModel trained,
                const std::string& flag, const std::string& text,
                std::optional<PromptedRun>& loaded);

// Sets the OpenMP threads and loads a.checkpoint's model (load_trained), and reads a.input (or
// a.prompt) into `loaded` (read_prompt); returns -1 to go on, or the usage exit code after saying
// what is wrong with --input or --prompt (the flag the checkpoint does not take; text longer than
// the model's context). Throws ConfigError for a language model's checkpoint when the command takes
// no
// --prompt.
int load_prompted_run(const std::string& command, const CheckpointArgs& a,
                      std::optional<PromptedRun>& loaded);

// The batch of one sequence the model reads for run, and the model's greedy answer (returned in
// `answer`). For a toy task: the prompt, the separator and the answer, teacher forced as in
// training. For text: inputs are the text's tokens [1, T], targets the text's next token at
// each position and at the last one the answer, the one token the model says next.
nn::SequenceBatch answered_batch(const PromptedRun& run, std::vector<int64_t>& answer);

// For a command that keeps [1, H, Tq, Tk] attention weights of batch (hook_pattern, the weights
// themselves, or a listing of the hook points, which runs the composed attention): returns -1
// when they fit the 2^28 elements train allows, or 2 after the usage error naming the shape, the
// prompt's flag and the checkpoint's --heads. Training never holds them on long sequences (the
// tiled kernel keeps none), so a checkpoint may read sequences whose weights are above it.
int refuse_weights_above_limit(const std::string& command, const CheckpointArgs& a,
                               const PromptedRun& run, const nn::SequenceBatch& batch);

// The --out flag of a command that writes a file.
struct OutputFlag {
  const char* help = "output HDF5 file (a new one)";
  bool required = true;  // else the command writes no file without it
};

// Adds --out and --overwrite, for a command that writes a file.
void add_output_options(CheckpointArgs& a, const OutputFlag& flag = {});

// parse_with_checkpoint for a command that writes a file (add_output_options): refuses an --out
// that may not be written (an existing file is replaced only with --overwrite, a checkpoint
// never; contents names what the command writes in the message), and --overwrite without an
// --out.
int parse_with_output(const std::string& command, const std::vector<std::string>& args,
                      CheckpointArgs& a, const std::string& contents);

// Sets the OpenMP threads to --threads and loads a.checkpoint (train::load_trained_model): the
// one way a command reads a checkpoint's model.
train::TrainedModel load_trained(const CheckpointArgs& a);

// A flag that gives a language model text (--data FILE) is a usage error on the checkpoint of
// a task that reads none: returns -1 when value is empty (the flag not given) or the checkpoint
// is a language model's, or 2 after "--data: <checkpoint> is a copy model, not a language
// model". Reads only the checkpoint's /config (CheckpointError for an unreadable one).
int check_text_flag(const std::string& command, const std::string& checkpoint,
                    const std::string& flag, const std::string& value,
                    const boost::program_options::options_description& options);

// "3 1 4 1 5"
std::string join(const std::vector<int64_t>& tokens);

// Tokens as the user reads them: a language model's text, quoted with its control characters
// escaped ('ab\n'), or a toy task's ids ("3 1 4").
std::string shown(const PromptedRun& run, const std::vector<int64_t>& tokens);

}  // namespace gradlab::cli
