// One table of fields drives the flags, the checkpoint attributes and the config file, so a
// hyperparameter is added in exactly one place.
#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <variant>

#include "autograd/error.h"
#include "autograd/format.h"
#include "data/text.h"
#include "train/memory.h"

namespace gradlab::train {
namespace {

void check(bool ok, const std::string& message) {
  if (!ok) throw ConfigError(message);
}

// "--d-model 64"
std::string flag(const std::string& name, int64_t value) {
  return name + " " + format_number(value);
}

// The largest tensor a run may build: the checkpoint reader's limit, so that every model saved
// can be loaded again.
constexpr int64_t kMaxElements = int64_t{1} << 28;

// Whether a tensor of these dims has at most kMaxElements elements. Checked factor by factor, so
// nothing overflows: every factor may be a huge untrusted number.
bool fits(std::initializer_list<int64_t> dims) {
  int64_t count = 1;
  for (const int64_t d : dims) {
    if (d > kMaxElements / count) return false;
    count *= std::max<int64_t>(d, 1);  // sizes are positive; 1 keeps the division defined
  }
  return true;
}

// Throws ConfigError unless the tensor fits, naming the flags that size it (e.g.
// "--batch-size 64, --length 100000 and --d-model 64 describe [B, T, C] activations
// [64, 200001, 64], above 2^28 elements").
void check_elements(const std::string& what, std::initializer_list<int64_t> dims,
                    const std::vector<std::string>& flags) {
  if (fits(dims)) return;
  std::string named, shape;
  for (size_t i = 0; i < flags.size(); ++i) {
    named += (i == 0 ? "" : i + 1 == flags.size() ? " and " : ", ") + flags[i];
  }
  for (const int64_t d : dims) shape += (shape.empty() ? "" : ", ") + format_number(d);
  throw ConfigError(named + (flags.size() == 1 ? " describes " : " describe ") + what + " [" +
                    shape + "], above 2^28 elements");
}

}  // namespace

std::vector<ConfigField> config_fields(RunConfig& c) {
  return {
      {"task", &c.task.name, "task: copy, reverse, sort, recall, or text (with --data)"},
      {"length", &c.task.length, "data tokens per sample (recall: key-value pairs)"},
      {"symbols", &c.task.num_symbols, "number of data symbols (vocabulary = symbols + 2)"},
      {"model", &c.model, "decoder (decoder-only) or seq2seq (encoder-decoder)"},
      {"d-model", &c.net.d_model, "model width C"},
      {"heads", &c.net.num_heads, "attention heads H (must divide d-model)"},
      {"kv-heads", &c.net.num_kv_heads, "K/V heads (0: same as heads; 1: multi-query)"},
      {"layers", &c.net.num_layers, "transformer blocks (seq2seq: per encoder and decoder)"},
      {"d-ff", &c.net.d_ff, "feed-forward hidden width"},
      {"dropout", &c.net.dropout, "dropout probability"},
      {"pre-norm", &c.net.pre_norm, "pre-LayerNorm blocks (false: post-LayerNorm)"},
      {"learned-positions", &c.net.learned_positions,
       "learned position embedding (false: sinusoidal)"},
      {"optimizer", &c.optimizer.name, "sgd, adam or adamw"},
      {"lr", &c.schedule.lr, "peak learning rate"},
      {"beta1", &c.optimizer.beta1, "Adam/AdamW beta1"},
      {"beta2", &c.optimizer.beta2, "Adam/AdamW beta2"},
      {"eps", &c.optimizer.eps, "Adam/AdamW epsilon"},
      {"weight-decay", &c.optimizer.weight_decay, "weight decay (weight matrices only)"},
      {"momentum", &c.optimizer.momentum, "SGD momentum"},
      {"nesterov", &c.optimizer.nesterov, "SGD Nesterov momentum"},
      {"schedule", &c.schedule.name, "constant, cosine or noam"},
      {"warmup", &c.schedule.warmup_steps, "linear warm-up steps"},
      {"min-lr", &c.schedule.min_lr, "cosine: final learning rate"},
      {"batch-size", &c.batch_size, "sequences per step"},
      {"steps", &c.steps, "maximum optimizer steps"},
      {"clip", &c.clip_norm, "clip gradients to this global norm (0: off)"},
      {"eval-every", &c.eval_every, "steps between held-out evaluations"},
      {"eval-size", &c.eval_size, "held-out sequences"},
      {"target-accuracy", &c.target_accuracy,
       "stop once held-out exact match reaches this (0: never)"},
      {"seed", &c.seed, "seed of the data, initialisation and dropout streams"},
      {"threads", &c.threads, "OpenMP threads for every kernel", false},
      {"max-memory", &c.max_memory,
       "GiB the run may need, estimated before it starts (0: 80% of this machine's memory)", false},
      {"save-every", &c.save_every, "save a checkpoint every N steps (0: only at the end)"},
      {"keep", &c.keep, "step checkpoints to keep"},
      {"check-replicas", &c.check_replicas,
       "on several processes (mpirun): check every N steps that all hold the same model and "
       "optimizer state (0: never)",
       false},
      {"bias", &c.net.bias, "biases in every Linear and LayerNorm", true, true},
      {"tie-embeddings", &c.net.tie_embeddings, "the output head shares the token embedding matrix",
       true, true},
      {"init", &c.net.init, "default or gpt2 (normal(0, 0.02), scaled residual projections)", true,
       true},
      {"data", &c.data, "--task text: the text file to model", true, true},
      {"tokenizer", &c.tokenizer, "--task text: char (Unicode characters) or byte", true, true},
      {"context", &c.context, "--task text: tokens the model reads at once", true, true},
      {"val-fraction", &c.val_fraction, "--task text: the end of the file held out", true, true},
      {"eval-iters", &c.eval_iters, "--task text: validation windows per evaluation", true, true},
      {"eval-full", &c.eval_full, "--task text: evaluate on the whole validation split", true,
       true},
  };
}

int64_t max_threads() {
  return 4 * std::max<int64_t>(std::thread::hardware_concurrency(), 1);
}

void check_threads(int64_t threads) {
  check(threads >= 1 && threads <= max_threads(),
        "--threads must be in [1, " + format_number(max_threads()) + "] (4 x the " +
            format_number(max_threads() / 4) + " cores of this machine), got " +
            format_number(threads));
}

const std::vector<std::string>& resumable_options() {
  static const std::vector<std::string> keys{
      "steps",   "eval-every",      "save-every", "keep",          "out",
      "threads", "target-accuracy", "data",       "check-replicas"};
  return keys;
}

void copy_fields(const RunConfig& from, RunConfig& to, const std::vector<std::string>& keys) {
  RunConfig source = from;
  const std::vector<ConfigField> source_fields = config_fields(source);
  const std::vector<ConfigField> target_fields = config_fields(to);
  for (size_t i = 0; i < source_fields.size(); ++i) {
    if (std::find(keys.begin(), keys.end(), source_fields[i].key) == keys.end()) continue;
    std::visit([&]<class P>(P* p) { *std::get<P*>(target_fields[i].value) = *p; },
               source_fields[i].value);
  }
}

namespace {

// The task's vocabulary size and the positions the model needs for it.
std::pair<int64_t, int64_t> task_sizes(const RunConfig& c) {
  if (c.task.name == "text") {
    int64_t vocabulary = 0;
    try {
      vocabulary = data::Vocabulary::deserialize(c.tokenizer, c.vocabulary).size();
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("--tokenizer: ") + e.what());
    }
    try {
      return {vocabulary, nn::positions_for_windows(c.model, c.context)};
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("--model: ") + e.what());
    }
  }
  check(c.task.length <= (1 << 20) && c.task.num_symbols <= (1 << 20),
        "--length and --symbols must be at most 2^20, got " + format_number(c.task.length) +
            " and " + format_number(c.task.num_symbols));
  const data::Task task = [&] {
    try {
      return data::Task(c.task);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("--task/--length/--symbols: ") + e.what());
    }
  }();
  try {
    return {task.vocab_size(),
            nn::positions_needed(c.model, task.prompt_length(), task.answer_length())};
  } catch (const ConfigError& e) {
    throw ConfigError(std::string("--model: ") + e.what());
  }
}

}  // namespace

void check_fields(const RunConfig& c) {
  // No setting is meant to be infinite or NaN, and a range check lets one through (x >= 0 takes
  // inf; !(x < 0) takes nan): one check here covers every floating-point flag.
  RunConfig copy = c;
  for (const ConfigField& f : config_fields(copy)) {
    if (const auto* value = std::get_if<double*>(&f.value)) {
      check(std::isfinite(**value),
            std::string("--") + f.key + " must be a finite number, got " + format_number(**value));
    }
  }
  if (c.task.name == "text") {
    check(!c.data.empty(), "--task text needs --data FILE");
    check(c.context > 0 && c.context <= (1 << 20),
          "--context must be in [1, 2^20], got " + format_number(c.context));
    check(c.val_fraction > 0 && c.val_fraction < 1,
          "--val-fraction must be in (0, 1), got " + format_number(c.val_fraction));
    check(c.eval_iters > 0, "--eval-iters must be positive, got " + format_number(c.eval_iters));
  }
  check(c.net.init == "default" || c.net.init == "gpt2",
        "--init: unknown init " + quote(c.net.init) + " (expected default or gpt2)");
  check(c.net.d_model > 0, "--d-model must be positive, got " + format_number(c.net.d_model));
  check(c.net.num_heads > 0, "--heads must be positive, got " + format_number(c.net.num_heads));
  check(c.net.d_model % c.net.num_heads == 0, "--d-model " + format_number(c.net.d_model) +
                                                  " is not divisible by --heads " +
                                                  format_number(c.net.num_heads));
  check(c.net.num_kv_heads >= 0,
        "--kv-heads must not be negative, got " + format_number(c.net.num_kv_heads));
  check(c.net.num_kv_heads == 0 || c.net.num_heads % c.net.num_kv_heads == 0,
        "--heads " + format_number(c.net.num_heads) + " is not divisible by --kv-heads " +
            format_number(c.net.num_kv_heads));
  check(c.net.num_layers > 0, "--layers must be positive, got " + format_number(c.net.num_layers));
  check(c.net.d_ff > 0, "--d-ff must be positive, got " + format_number(c.net.d_ff));
  check(c.net.dropout >= 0 && c.net.dropout < 1,
        "--dropout must be in [0, 1), got " + format_number(c.net.dropout));
  check(c.batch_size > 0, "--batch-size must be positive, got " + format_number(c.batch_size));
  check(c.steps > 0, "--steps must be positive, got " + format_number(c.steps));
  check(c.clip_norm >= 0, "--clip must not be negative, got " + format_number(c.clip_norm));
  check(c.eval_every > 0, "--eval-every must be positive, got " + format_number(c.eval_every));
  check(c.eval_size > 0, "--eval-size must be positive, got " + format_number(c.eval_size));
  check(c.target_accuracy >= 0 && c.target_accuracy <= 1,
        "--target-accuracy must be in [0, 1], got " + format_number(c.target_accuracy));
  check_threads(c.threads);
  check(c.max_memory >= 0 && std::isfinite(c.max_memory),
        "--max-memory must be a number of GiB >= 0, got " + format_number(c.max_memory));
  check(c.save_every >= 0, "--save-every must not be negative, got " + format_number(c.save_every));
  check(c.keep > 0, "--keep must be positive, got " + format_number(c.keep));
  check(c.check_replicas >= 0,
        "--check-replicas must be 0 (never) or positive, got " + format_number(c.check_replicas));
  ScheduleConfig schedule = c.schedule;
  schedule.d_model = c.net.d_model;
  schedule.total_steps = c.steps;
  validate(schedule);
  make_optimizer(c.optimizer, {});  // validates the optimizer fields
}

void finalize(RunConfig& c) {
  check_fields(c);
  const auto [vocab_size, positions] = task_sizes(c);
  c.net.vocab_size = vocab_size;
  c.net.max_len = positions;
  c.net.seed = c.seed;
  // A run must be buildable and savable: no weight, activation or batch above the checkpoint's
  // 2^28 elements. Each tensor is checked with the flags that size it, so that the message
  // names what to make smaller. T is the longest sequence (the positions the model needs).
  const bool text = c.task.name == "text";
  const std::string model = flag("--d-model", c.net.d_model), ff = flag("--d-ff", c.net.d_ff),
                    batch = flag("--batch-size", c.batch_size),
                    length = text ? flag("--context", c.context) : flag("--length", c.task.length),
                    vocabulary = text ? "the text's vocabulary of " + format_number(vocab_size)
                                      : flag("--symbols", c.task.num_symbols);
  const int64_t B = c.batch_size, T = positions, C = c.net.d_model, V = vocab_size;
  check_elements("[C, C] weights", {C, C}, {model});
  check_elements("[C, d_ff] weights", {C, c.net.d_ff}, {model, ff});
  check_elements("the [vocabulary, C] embedding", {V, C}, {vocabulary, model});
  check_elements("[B, T, C] activations", {B, T, C}, {batch, length, model});
  check_elements("[B, T, d_ff] activations", {B, T, c.net.d_ff}, {batch, length, ff});
  check_elements("[B, T, vocabulary] logits", {B, T, V}, {batch, length, vocabulary});
  check_elements("[B, H, T, T] attention scores", {B, c.net.num_heads, T, T},
                 {batch, flag("--heads", c.net.num_heads), length});
  if (text) {
    check_elements("[windows, T] validation windows", {c.eval_iters, c.context + 1},
                   {flag("--eval-iters", c.eval_iters), length});
  } else {
    check_elements("[sequences, T] held-out set", {c.eval_size, T},
                   {flag("--eval-size", c.eval_size), length});
  }
  c.schedule.d_model = c.net.d_model;
  c.schedule.total_steps = c.steps;
  check_memory(c);
}

namespace {

std::vector<ConfigEntry> entries_of(const RunConfig& config, bool include_local) {
  RunConfig copy = config;
  std::vector<ConfigEntry> entries;
  for (const ConfigField& f : config_fields(copy)) {
    if (!f.saved && !include_local) continue;
    std::visit(
        [&]<class P>(P* p) {
          if constexpr (std::is_same_v<P, double> || std::is_same_v<P, std::string>) {
            entries.emplace_back(f.key, *p);
          } else {
            entries.emplace_back(f.key, static_cast<int64_t>(*p));
          }
        },
        f.value);
  }
  return entries;
}

}  // namespace

// The vocabulary is derived from the data, not a flag, and may hold characters a config file
// cannot (newlines): it is an attribute of /config only.
constexpr const char* kVocabularyKey = "vocabulary";

std::vector<ConfigEntry> to_entries(const RunConfig& config) {
  std::vector<ConfigEntry> entries = entries_of(config, false);
  if (config.task.name == "text") entries.emplace_back(kVocabularyKey, config.vocabulary);
  return entries;
}

RunConfig from_entries(const std::vector<ConfigEntry>& entries, const std::string& path) {
  RunConfig config;
  for (const ConfigField& f : config_fields(config)) {
    if (!f.saved) continue;
    const auto it = std::find_if(entries.begin(), entries.end(),
                                 [&](const ConfigEntry& e) { return e.first == f.key; });
    if (it == entries.end()) {
      if (f.optional) continue;
      throw CheckpointError(path + ": /config/" + f.key + ": missing");
    }
    std::visit(
        [&]<class P>(P* p) {
          using Stored =
              std::conditional_t<std::is_same_v<P, double> || std::is_same_v<P, std::string>, P,
                                 int64_t>;
          const Stored* value = std::get_if<Stored>(&it->second);
          if (!value) {
            throw CheckpointError(path + ": /config/" + f.key + ": has the wrong type");
          }
          *p = static_cast<P>(*value);
          if constexpr (std::is_same_v<P, double>) {
            // Checked here, not by check_fields, so that it is reported as the file's problem.
            if (!std::isfinite(*p)) {
              throw CheckpointError(path + ": /config/" + f.key + ": not a finite number (" +
                                    format_number(*p) + ")");
            }
          }
        },
        f.value);
  }
  if (config.task.name == "text") {
    const auto it = std::find_if(entries.begin(), entries.end(),
                                 [](const ConfigEntry& e) { return e.first == kVocabularyKey; });
    const std::string* symbols =
        it == entries.end() ? nullptr : std::get_if<std::string>(&it->second);
    if (!symbols) {
      throw CheckpointError(path + ": /config/" + kVocabularyKey + ": missing or not a string");
    }
    config.vocabulary = *symbols;
  }
  return config;
}

std::string to_config_file(const RunConfig& config) {
  std::string text = "# gradlab train configuration; reuse with: gradlab train --config FILE\n";
  for (const auto& [key, value] : entries_of(config, true)) {
    text += key + " = " + to_string(value) + "\n";
  }
  return text;
}

}  // namespace gradlab::train
