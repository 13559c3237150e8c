// One table of fields drives the flags, the checkpoint attributes and the config file, so a
// hyperparameter is added in exactly one place.
#include "train/config.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <variant>

#include "autograd/error.h"
#include "autograd/format.h"
#include "data/tasks.h"
#include "nn/initialisation.h"
#include "nn/layers.h"
#include "nn/module_registry.h"
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

}  // namespace

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

namespace {

// The fields of a run around its task's: `task`, then task_fields, then the model's and the
// loop's; a program's own data has no loop fields (the model's only, in the same order).
std::vector<ConfigField> fields_around(RunConfig& c, const std::vector<ConfigField>& task_fields,
                                       bool loop) {
  static const std::string task_help = "task: " + data::task_names() + " (docs/tasks.md)";
  static const std::string model_help = nn::model_kinds_described();
  static const std::string optimizer_help = [] {
    std::vector<std::string> names;
    for (const OptimizerRow& row : optimizer_kinds()) names.push_back(row.name);
    return name_list(names);
  }();
  static const std::string schedule_help = [] {
    std::vector<std::string> names;
    for (const ScheduleKind& kind : schedule_kinds()) names.push_back(kind.name);
    return name_list(names);
  }();
  // "layer: ...; none: ...": a table's rows with their help lines.
  const auto rows_help = [](const auto& rows) {
    std::string help;
    for (const auto& row : rows) {
      help += (help.empty() ? "" : "; ") + std::string(row.name) + ": " + row.help;
    }
    return help;
  };
  static const std::string init_help = rows_help(nn::init_kinds());
  static const std::string norm_help = rows_help(nn::norm_registry().rows());
  static const std::string feed_forward_help =
      "the blocks' feed-forward sublayer; " + rows_help(nn::feed_forward_registry().rows());
  static const std::string positions_help =
      "what the tokens get for their positions (with --learned-positions 0, learned means "
      "sinusoidal); " +
      rows_help(nn::positions_registry().rows());
  static const std::string score_modifier_help =
      "what every self-attention layer does to its scores before the softmax; " +
      rows_help(nn::score_modifier_registry().rows());
  static const std::string activation_help =
      "the feed-forward's nonlinearity; " + rows_help(nn::activation_kinds());
  std::vector<ConfigField> fields{{"task", &c.task.name, task_help.c_str()}};
  fields.insert(fields.end(), task_fields.begin(), task_fields.end());
  const std::vector<ConfigField> model_fields{
      {"model", &c.model, model_help.c_str()},
      {"d-model", &c.net.d_model, "model width C"},
      {"heads", &c.net.attention.num_heads, "attention heads H (must divide d-model)"},
      {"kv-heads", &c.net.attention.num_kv_heads, "K/V heads (0: same as heads; 1: multi-query)"},
      {"layers", &c.net.num_layers, "transformer blocks (seq2seq: per encoder and decoder)"},
      {"d-ff", &c.net.feed_forward.d_ff, "feed-forward hidden width F (0: attention-only blocks)"},
      {"dropout", &c.net.dropout, "dropout probability"},
      {"pre-norm", &c.net.block.pre_norm, "pre-LayerNorm blocks (false: post-LayerNorm)"},
      {"learned-positions", &c.net.embedding.learned_positions,
       "learned position embedding (false: sinusoidal; the older spelling of --positions)"},
  };
  const std::vector<ConfigField> loop_fields{
      {"optimizer", &c.optimizer.name, optimizer_help.c_str()},
      {"lr", &c.schedule.lr, "peak learning rate"},
      {"beta1", &c.optimizer.beta1, "Adam/AdamW beta1"},
      {"beta2", &c.optimizer.beta2, "Adam/AdamW beta2"},
      {"eps", &c.optimizer.eps, "Adam/AdamW epsilon"},
      {"weight-decay", &c.optimizer.weight_decay,
       "weight decay (weight matrices only, unless --decay-all)"},
      {"momentum", &c.optimizer.momentum, "SGD momentum"},
      {"nesterov", &c.optimizer.nesterov, "SGD Nesterov momentum"},
      {"schedule", &c.schedule.name, schedule_help.c_str()},
      {"warmup", &c.schedule.warmup_steps, "linear warm-up steps"},
      {"min-lr", &c.schedule.min_lr, "cosine: final learning rate"},
      {"batch-size", &c.batch_size,
       "sequences per step (0: the whole training set, for a task with a finite one: modular)"},
      {"steps", &c.steps, "maximum optimizer steps"},
      {"clip", &c.clip_norm, "clip gradients to this global norm (0: off)"},
      {"eval-every", &c.eval_every, "steps between held-out evaluations"},
      {"eval-size", &c.eval_size, "held-out sequences (modular: unused, all unseen pairs)"},
      {"target-exact-match", &c.target_exact_match,
       "stop once the held-out exact match (every answer token right) reaches this (0: never)",
       true, false, true, "target-accuracy"},
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
  };
  // Added after the others: kept last, so that /config keeps its order.
  const std::vector<ConfigField> model_options{
      {"bias", &c.net.bias, "biases in every Linear and LayerNorm", true, true},
      {"tie-embeddings", &c.net.embedding.tie_embeddings,
       "the output head shares the token embedding matrix", true, true},
      {"init", &c.net.init, init_help.c_str(), true, true},
      {"norm", &c.net.norm.kind, norm_help.c_str(), true, true},
      {"activation", &c.net.feed_forward.activation, activation_help.c_str(), true, true},
  };
  const std::vector<ConfigField> later_loop_fields{
      {"stop-on-loss-spike", &c.stop_on_loss_spike,
       "stop the run when a step's loss is far above its running level (false: let the loss "
       "spikes of long full-batch runs pass, as grokking needs; non-finite values always stop it)",
       true, true},
  };
  // The newest model options, after everything else for the same reason.
  const std::vector<ConfigField> newer_model_options{
      {"final-norm", &c.net.norm.final,
       "a norm before the head (and after the encoder) (false: the head reads the residual "
       "stream)",
       true, true},
      {"feed-forward", &c.net.feed_forward.kind, feed_forward_help.c_str(), true, true},
      {"positions", &c.net.embedding.positions, positions_help.c_str(), true, true},
      {"score-modifier", &c.net.attention.score_modifier, score_modifier_help.c_str(), true, true},
  };
  fields.insert(fields.end(), model_fields.begin(), model_fields.end());
  if (loop) fields.insert(fields.end(), loop_fields.begin(), loop_fields.end());
  fields.insert(fields.end(), model_options.begin(), model_options.end());
  if (loop) fields.insert(fields.end(), later_loop_fields.begin(), later_loop_fields.end());
  fields.insert(fields.end(), newer_model_options.begin(), newer_model_options.end());
  // Newer still: kept after those.
  const std::vector<ConfigField> newest_loop_fields{
      {"decay-all", &c.optimizer.decay_all,
       "decay every parameter, biases and norms too (torch.optim.AdamW's default)", true, true},
  };
  if (loop) fields.insert(fields.end(), newest_loop_fields.begin(), newest_loop_fields.end());
  return fields;
}

}  // namespace

std::vector<ConfigField> config_fields(RunConfig& c) {
  return fields_around(c, data::all_task_fields(c.task), true);
}

std::vector<ConfigField> run_fields(RunConfig& c) {
  return fields_around(c, data::own_task_fields(c.task), !data::task_kind(c.task.name).own_data);
}

std::shared_ptr<data::Task> make_task(const RunConfig& config) {
  return data::make_task(config.task);
}

std::shared_ptr<data::Task> prepare_task(RunConfig& config) {
  std::shared_ptr<data::Task> task = make_task(config);
  task->prepare(config.task);
  return task;
}

int64_t batch_rows(const RunConfig& config) {
  return config.batch_size == 0 ? make_task(config)->training_set_size() : config.batch_size;
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
      "steps", "eval-every",         "save-every",      "keep",          "out", "threads",
      "data",  "target-exact-match", "target-accuracy", "check-replicas"};
  return keys;
}

void copy_fields(const RunConfig& from, RunConfig& to, const std::vector<std::string>& keys) {
  RunConfig source = from;
  const std::vector<ConfigField> source_fields = config_fields(source);
  const std::vector<ConfigField> target_fields = config_fields(to);
  const auto named = [&](const char* key) {
    return key && std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  for (size_t i = 0; i < source_fields.size(); ++i) {
    if (!named(source_fields[i].key) && !named(source_fields[i].old_key)) continue;
    std::visit([&]<class P>(P* p) { *std::get<P*>(target_fields[i].value) = *p; },
               source_fields[i].value);
  }
}

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
  const std::shared_ptr<data::Task> task = make_task(c);  // checks the task's own options
  // A model option names a row of its table: the error names the flag and the rows.
  const auto check_kind = [](const char* flag, const auto& find, const std::string& name) {
    try {
      find(name);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string(flag) + ": " + e.what());
    }
  };
  check_kind("--init", nn::init_kind, c.net.init);
  check_kind(
      "--norm", [](const std::string& n) { nn::norm_registry().find(n); }, c.net.norm.kind);
  check_kind(
      "--feed-forward", [](const std::string& n) { nn::feed_forward_registry().find(n); },
      c.net.feed_forward.kind);
  check_kind(
      "--positions", [](const std::string& n) { nn::positions_registry().find(n); },
      c.net.embedding.positions);
  check_kind(
      "--score-modifier", [](const std::string& n) { nn::score_modifier_registry().find(n); },
      c.net.attention.score_modifier);
  check_kind("--activation", nn::activation_kind, c.net.feed_forward.activation);
  check(c.net.d_model > 0, "--d-model must be positive, got " + format_number(c.net.d_model));
  check(c.net.attention.num_heads > 0,
        "--heads must be positive, got " + format_number(c.net.attention.num_heads));
  check(c.net.d_model % c.net.attention.num_heads == 0,
        "--d-model " + format_number(c.net.d_model) + " is not divisible by --heads " +
            format_number(c.net.attention.num_heads));
  check(c.net.attention.num_kv_heads >= 0,
        "--kv-heads must not be negative, got " + format_number(c.net.attention.num_kv_heads));
  check(c.net.attention.num_kv_heads == 0 ||
            c.net.attention.num_heads % c.net.attention.num_kv_heads == 0,
        "--heads " + format_number(c.net.attention.num_heads) + " is not divisible by --kv-heads " +
            format_number(c.net.attention.num_kv_heads));
  check(c.net.num_layers > 0, "--layers must be positive, got " + format_number(c.net.num_layers));
  check(c.net.feed_forward.d_ff >= 0,
        "--d-ff must be positive, or 0 for attention-only blocks, got " +
            format_number(c.net.feed_forward.d_ff));
  check(c.net.dropout >= 0 && c.net.dropout < 1,
        "--dropout must be in [0, 1), got " + format_number(c.net.dropout));
  if (task->training_set_size() > 0) {
    check(c.batch_size >= 0,
          "--batch-size must be positive, or 0 for the whole training set, got " +
              format_number(c.batch_size));
  } else {
    check(c.batch_size > 0, "--batch-size must be positive, got " + format_number(c.batch_size) +
                                " (0, the whole training set, is for a task with a finite one)");
  }
  check(c.steps > 0, "--steps must be positive, got " + format_number(c.steps));
  check(c.clip_norm >= 0, "--clip must not be negative, got " + format_number(c.clip_norm));
  check(c.eval_every > 0, "--eval-every must be positive, got " + format_number(c.eval_every));
  check(c.eval_size > 0, "--eval-size must be positive, got " + format_number(c.eval_size));
  check(c.target_exact_match >= 0 && c.target_exact_match <= 1,
        "--target-exact-match must be in [0, 1], got " + format_number(c.target_exact_match));
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
  c.net.embedding = nn::resolved_positions(c.net.embedding);  // /config records the scheme
  const std::shared_ptr<data::Task> task = make_task(c);
  const int64_t vocab_size = task->vocab_size();
  const int64_t positions = [&] {
    try {
      return task->positions(c.model);
    } catch (const ConfigError& e) {
      throw ConfigError(std::string("--model: ") + e.what());
    }
  }();
  c.net.vocab_size = vocab_size;
  c.net.max_len = positions;
  c.net.seed = c.seed;
  // A run must be buildable and savable: no weight, activation or batch above the checkpoint's
  // 2^28 elements. Each tensor is checked with the flags that size it, so that the message
  // names what to make smaller. T is the longest sequence (the positions the model needs);
  // attention scores count only where they are kept: the tiled kernel that long sequences take
  // without dropout never holds them (nn::longest_keys_with_weights).
  const std::string model = flag("--d-model", c.net.d_model),
                    ff = flag("--d-ff", c.net.feed_forward.d_ff),
                    batch = flag("--batch-size", c.batch_size), length = task->length_flag(),
                    vocabulary = task->vocabulary_flag();
  const int64_t B = batch_rows(c), T = positions, C = c.net.d_model, V = vocab_size;
  check_elements("[C, C] weights", {C, C}, {model});
  check_elements("[C, d_ff] weights", {C, c.net.feed_forward.d_ff}, {model, ff});
  check_elements("the [vocabulary, C] embedding", {V, C}, {vocabulary, model});
  check_elements("[B, T, C] activations", {B, T, C}, {batch, length, model});
  check_elements("[B, T, d_ff] activations", {B, T, c.net.feed_forward.d_ff}, {batch, length, ff});
  check_elements("[B, T, vocabulary] logits", {B, T, V}, {batch, length, vocabulary});
  const int64_t K = nn::model_footprint(c.model, c.net).longest_keys_with_weights;
  std::vector<std::string> score_flags{batch, flag("--heads", c.net.attention.num_heads), length};
  if (c.net.dropout > 0) score_flags.push_back("--dropout " + format_number(c.net.dropout));
  check_elements("[B, H, T, T] attention scores", {B, c.net.attention.num_heads, K, K},
                 score_flags);
  const data::HeldoutSize heldout = task->heldout_size(c.eval_size, T);
  check_elements(heldout.what, {heldout.rows, heldout.positions}, {heldout.flag, length});
  c.schedule.d_model = c.net.d_model;
  c.schedule.total_steps = c.steps;
  check_memory(c);
}

namespace {

// The run's fields as /config attributes (checkpoint) or config-file lines (not).
std::vector<ConfigEntry> entries_of(const RunConfig& config, bool checkpoint) {
  RunConfig copy = config;
  std::vector<ConfigEntry> entries;
  for (const ConfigField& f : run_fields(copy)) {
    if (checkpoint ? !f.saved : !f.flag) continue;
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

// Reads field f from entries (under its key, or else its old one); false if neither is there.
bool read_field(const std::vector<ConfigEntry>& entries, const ConfigField& f,
                const std::string& path) {
  const auto find = [&](const char* key) {
    return std::find_if(entries.begin(), entries.end(),
                        [&](const ConfigEntry& e) { return key && e.first == key; });
  };
  auto it = find(f.key);
  if (it == entries.end()) it = find(f.old_key);
  if (it == entries.end()) return false;
  std::visit(
      [&]<class P>(P* p) {
        using Stored =
            std::conditional_t<std::is_same_v<P, double> || std::is_same_v<P, std::string>, P,
                               int64_t>;
        const Stored* value = std::get_if<Stored>(&it->second);
        if (!value) throw CheckpointError(path + ": /config/" + it->first + ": has the wrong type");
        *p = static_cast<P>(*value);
        if constexpr (std::is_same_v<P, double>) {
          // Checked here, not by check_fields, so that it is reported as the file's problem.
          if (!std::isfinite(*p)) {
            throw CheckpointError(path + ": /config/" + it->first + ": not a finite number (" +
                                  format_number(*p) + ")");
          }
        }
      },
      f.value);
  return true;
}

}  // namespace

std::vector<ConfigEntry> to_entries(const RunConfig& config) {
  return entries_of(config, true);
}

RunConfig from_entries(const std::vector<ConfigEntry>& entries, const std::string& path) {
  RunConfig config;
  // The task first: it says which task fields the file holds.
  const ConfigField task = config_fields(config).front();
  if (!read_field(entries, task, path)) {
    // What a program writes for a model of its own: only that program can build it.
    throw CheckpointError(path + ": /config/" + task.key +
                          ": missing (not a gradlab run nor a built-in model: a program's own "
                          "model, which only that program can build)");
  }
  std::vector<ConfigField> fields;
  try {
    fields = run_fields(config);
  } catch (const ConfigError& e) {
    throw CheckpointError(path + ": /config: " + e.what());
  }
  for (const ConfigField& f : fields) {
    if (f.saved && !read_field(entries, f, path) && !f.optional) {
      throw CheckpointError(path + ": /config/" + f.key + ": missing");
    }
  }
  try {
    make_task(
        config);  // the task's own checks: a text's stored vocabulary (Vocabulary::characters)
  } catch (const ConfigError& e) {
    throw CheckpointError(path + ": /config: " + e.what());
  }
  return config;
}

std::vector<ConfigEntry> program_entries(const nn::SequenceModel& model,
                                         const std::vector<ConfigEntry>& given) {
  const auto has = [](const std::vector<ConfigEntry>& entries, const std::string& key) {
    return std::any_of(entries.begin(), entries.end(),
                       [&](const ConfigEntry& e) { return e.first == key; });
  };
  RunConfig run;
  const std::string task_key = config_fields(run).front().key;
  if (has(given, task_key) || model.kind().empty()) return given;
  run.task.name = data::own_data_kind().name;
  run.task.program.vocab_size = model.config().vocab_size;
  run.task.program.positions = model.config().max_len;
  run.model = model.kind();
  run.net = model.config();
  std::vector<ConfigEntry> entries = to_entries(run);
  for (const ConfigEntry& entry : given) {
    if (!has(entries, entry.first)) entries.push_back(entry);
  }
  return entries;
}

std::string to_config_file(const RunConfig& config) {
  std::string text = "# gradlab train configuration; reuse with: gradlab train --config FILE\n";
  for (const auto& [key, value] : entries_of(config, false)) {
    text += key + " = " + to_string(value) + "\n";
  }
  return text;
}

}  // namespace gradlab::train
