// The option group of the instruments that read data sets, and the reading of their examples
// into batches of one length.
#include "cli/input_set_option.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>

#include "autograd/format.h"
#include "cli/options.h"
#include "nn/hooks.h"
#include "train/memory.h"
#include "train/trainer.h"

namespace gradlab::cli {
namespace {

namespace po = boost::program_options;

// Appends the one-row batch `row` to group (whose rows have its lengths).
void append_row(InputGroup& group, const nn::SequenceBatch& row) {
  const auto append = [](Indices& to, const Indices& from) {
    if (from.shape.empty()) return;
    if (to.shape.empty()) to.shape = {0, from.shape.at(1)};
    ++to.shape[0];
    to.values.insert(to.values.end(), from.values.begin(), from.values.end());
  };
  append(group.batch.source, row.source);
  append(group.batch.inputs, row.inputs);
  append(group.batch.targets, row.targets);
}

// Adds one example (a one-row batch) to the group of its lengths.
void add_example(InputSet& set, std::map<std::pair<int64_t, int64_t>, size_t>& group_of,
                 const nn::SequenceBatch& row, std::vector<int64_t> answer, std::string origin) {
  const std::pair<int64_t, int64_t> lengths{row.inputs.shape.at(1),
                                            row.source.shape.empty() ? 0 : row.source.shape.at(1)};
  const auto [at, added] = group_of.emplace(lengths, set.groups.size());
  if (added) set.groups.emplace_back();
  InputGroup& group = set.groups[at->second];
  append_row(group, row);
  group.answers.push_back(std::move(answer));
  group.examples.push_back(set.examples++);
  set.origins.push_back(std::move(origin));
}

// The target tokens of a row of targets [1, T] (the held-out row's answer).
std::vector<int64_t> targets_of(const Indices& targets) {
  std::vector<int64_t> out;
  for (const int64_t t : targets.values) {
    if (t != nn::kIgnoreTarget) out.push_back(t);
  }
  return out;
}

// Calls read_line on each line of --data (without its newline) with where it is ("--data F line
// 3"); returns -1, or the usage exit code of a file that cannot be read, is empty or has an empty
// line, or read_line's.
int read_lines(
    const std::string& command, const CheckpointArgs& c, const InputSetArgs& s,
    const std::function<int(const std::string& line, const std::string& where)>& read_line) {
  std::ifstream in(s.data);
  const std::string file = "--data " + s.data;
  if (!in) {
    return usage_error(command, file + ": cannot be read (" + std::strerror(errno) + ")",
                       c.options);
  }
  int64_t number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = file + " line " + format_number(number);
    if (line.empty()) {
      return usage_error(command, where + ": an empty line (one prompt a line)", c.options);
    }
    if (const int code = read_line(line, where); code >= 0) return code;
  }
  if (number == 0) {
    return usage_error(command, file + ": no prompts (the file is empty)", c.options);
  }
  return -1;
}

// The line's prompt as one prompt is read, and the model's answer; returns -1 or the usage code.
int read_line_prompt(const std::string& command, const CheckpointArgs& c, const InputSet& set,
                     const std::string& flag, const std::string& text, nn::SequenceBatch& row,
                     std::vector<int64_t>& answer) {
  std::optional<PromptedRun> run;
  if (const int code = read_prompt(command, c, set.trained, flag, text, run); code >= 0) {
    return code;
  }
  row = answered_batch(*run, answer);
  return -1;
}

int read_data_file(const std::string& command, const CheckpointArgs& c, const InputSetArgs& s,
                   InputSet& set) {
  std::map<std::pair<int64_t, int64_t>, size_t> group_of;
  return read_lines(command, c, s, [&](const std::string& line, const std::string& where) {
    nn::SequenceBatch row;
    std::vector<int64_t> answer;
    if (const int code = read_line_prompt(command, c, set, where, line, row, answer); code >= 0) {
      return code;
    }
    add_example(set, group_of, row, std::move(answer), where);
    return -1;
  });
}

int read_held_out(const std::string& command, const CheckpointArgs& c, const InputSetArgs& s,
                  InputSet& set) {
  const std::unique_ptr<train::Trainer> trainer = train::scoring_trainer(set.trained);
  const nn::SequenceBatch& heldout = trainer->heldout();
  const int64_t available = heldout.inputs.shape.at(0);
  if (s.held_out > available) {
    return usage_error(command,
                       "--held-out " + format_number(s.held_out) + ": the held-out set has " +
                           format_number(available) + " rows",
                       c.options);
  }
  std::map<std::pair<int64_t, int64_t>, size_t> group_of;
  for (int64_t r = 0; r < s.held_out; ++r) {
    const nn::SequenceBatch row = nn::rows_of(heldout, r, 1);
    add_example(set, group_of, row, targets_of(row.targets), "--held-out row " + format_number(r));
  }
  return -1;
}

}  // namespace

void add_input_set_options(CheckpointArgs& c, InputSetArgs& s, const InputSetFlags& flags) {
  if (flags.prompt) add_prompt_options(c);
  // --data and --held-out stand instead of a prompt: parse_input_set checks that one is given.
  c.takes_text = false;
  if (flags.pairs) {
    c.options.add_options()("data", po::value(&s.data),
                            "instead of --clean and --corrupt: a file of pairs, one a line, the "
                            "clean and the corrupted prompt separated by a tab, each read as they "
                            "read one; the scores are the mean logit difference's");
  } else {
    c.options.add_options()(
        "data", po::value(&s.data),
        "instead of a prompt: a file of prompts, one a line (a toy task's tokens \"3 1 4\", raw "
        "ids, or a language model's text), each read as --input or --prompt reads one")(
        "held-out", po::value(&s.held_out),
        "instead of a prompt: the first N rows of the checkpoint's held-out set");
  }
  if (flags.reduce) {
    c.options.add_options()("reduce", po::value(&s.reduce)->default_value(s.reduce),
                            "with --data or --held-out: mean (over the examples) or none (every "
                            "example kept, along a leading axis)");
  }
  s.at = flags.at_default;
  if (flags.at) {
    c.options.add_options()("at", po::value(&s.at)->default_value(s.at),
                            "with --data or --held-out: answer (each example's answer position "
                            "only) or all (every position; the examples must be of one length)");
  }
  add_max_memory_option(c.options, s.max_memory, flags.memory);
}

int parse_input_set(const std::string& command, CheckpointArgs& c, InputSetArgs& s,
                    const InputSetFlags& flags) {
  const bool data = c.vm.count("data") > 0, held_out = c.vm.count("held-out") > 0;
  s.given = data || held_out;
  if (flags.prompt) {
    if (c.vm.count("input") + c.vm.count("prompt") + data + held_out != 1) {
      return usage_error(command,
                         "give exactly one of --input (a toy task's prompt), --prompt (a language "
                         "model's text), --data (a file of prompts) and --held-out (rows of the "
                         "held-out set)",
                         c.options);
    }
    // A prompt is read as the commands with --input and --prompt read it.
    c.takes_text = !s.given;
  } else if (data && held_out) {
    return usage_error(command, "give at most one of --data and --held-out", c.options);
  }
  if (held_out && s.held_out < 1) {
    return usage_error(command, "--held-out " + format_number(s.held_out) + ": at least 1 row",
                       c.options);
  }
  if (const int code = check_input_file(command, "--data", s.data, c.options); code >= 0) {
    return code;
  }
  for (const auto& [flag, value, first, second] :
       {std::tuple<const char*, const std::string*, const char*, const char*>{"reduce", &s.reduce,
                                                                              "mean", "none"},
        {"at", &s.at, "answer", "all"}}) {
    if (!c.vm.count(flag)) continue;
    if (*value != first && *value != second) {
      return usage_error(
          command, "--" + std::string(flag) + " " + quote(*value) + ": " + first + " or " + second,
          c.options);
    }
    if (!c.vm[flag].defaulted() && !s.given) {
      return usage_error(
          command, "--" + std::string(flag) + " reduces a data set: give --data or --held-out",
          c.options);
    }
  }
  return check_max_memory(command, s.max_memory, c.options);
}

int64_t InputSet::first_unequal() const {
  if (groups.size() < 2) return -1;
  int64_t first = examples;
  for (size_t g = 1; g < groups.size(); ++g) first = std::min(first, groups[g].examples.front());
  return first;
}

int load_prompt_pairs(const std::string& command, const CheckpointArgs& c, const InputSetArgs& s,
                      std::optional<InputSet>& clean, std::optional<InputSet>& corrupt) {
  InputSet sets[2] = {{load_trained(c), {}, 0, std::nullopt, {}}, {}};
  sets[1].trained = sets[0].trained;
  std::map<std::pair<int64_t, int64_t>, size_t> group_of[2];
  const int code =
      read_lines(command, c, s, [&](const std::string& line, const std::string& where) {
        const size_t tab = line.find('\t');
        if (tab == std::string::npos) {
          return usage_error(command,
                             where +
                                 ": no tab between the clean and the corrupted prompt "
                                 "(clean<TAB>corrupt)",
                             c.options);
        }
        const std::string texts[2] = {line.substr(0, tab), line.substr(tab + 1)};
        const char* const sides[2] = {" (clean)", " (corrupt)"};
        nn::SequenceBatch rows[2];
        std::vector<int64_t> answers[2];
        for (size_t side = 0; side < 2; ++side) {
          if (const int code = read_line_prompt(command, c, sets[side], where + sides[side],
                                                texts[side], rows[side], answers[side]);
              code >= 0) {
            return code;
          }
        }
        if (rows[0].inputs.shape != rows[1].inputs.shape ||
            rows[0].source.shape != rows[1].source.shape) {
          return usage_error(
              command,
              where + ": the clean prompt has " + format_number(rows[0].inputs.shape.at(1)) +
                  " positions and the corrupted " + format_number(rows[1].inputs.shape.at(1)) +
                  "; patching needs a pair of one length",
              c.options);
        }
        for (size_t side = 0; side < 2; ++side) {
          add_example(sets[side], group_of[side], rows[side], std::move(answers[side]), where);
        }
        return -1;
      });
  if (code >= 0) return code;
  clean.emplace(std::move(sets[0]));
  corrupt.emplace(std::move(sets[1]));
  return -1;
}

int load_input_set(const std::string& command, const CheckpointArgs& c, const InputSetArgs& s,
                   std::optional<InputSet>& loaded) {
  if (!s.given) {
    std::optional<PromptedRun> run;
    if (const int code = load_prompted_run(command, c, run); code >= 0) return code;
    std::vector<int64_t> answer;
    nn::SequenceBatch batch = answered_batch(*run, answer);
    InputSet set{run->trained, {}, 1, std::nullopt, {run->text() ? "--prompt" : "--input"}};
    set.groups.push_back({std::move(batch), {std::move(answer)}, {0}});
    set.prompt = std::move(run);
    loaded.emplace(std::move(set));
    return -1;
  }
  InputSet set{load_trained(c), {}, 0, std::nullopt, {}};
  const int code =
      s.data.empty() ? read_held_out(command, c, s, set) : read_data_file(command, c, s, set);
  if (code >= 0) return code;
  loaded.emplace(std::move(set));
  return -1;
}

int refuse_unequal_lengths(const std::string& command, const CheckpointArgs& c, const InputSet& set,
                           const std::string& why) {
  const int64_t unequal = set.first_unequal();
  if (unequal < 0) return -1;
  const auto length = [&](int64_t example) {
    for (const InputGroup& group : set.groups) {
      if (std::find(group.examples.begin(), group.examples.end(), example) !=
          group.examples.end()) {
        return group.batch.inputs.shape.at(1);
      }
    }
    return int64_t{0};
  };
  return usage_error(command,
                     set.origins[static_cast<size_t>(unequal)] + ": " +
                         format_number(length(unequal)) + " positions where " +
                         set.origins.front() + " has " + format_number(length(0)) + "; " + why +
                         " and needs examples of one length",
                     c.options);
}

int64_t rows_per_batch(const InputSetArgs& s, double bytes_per_row) {
  const double rows = train::memory_limit(s.max_memory) / std::max(1.0, bytes_per_row);
  return rows >= 1e9 ? int64_t{1000000000} : std::max<int64_t>(1, static_cast<int64_t>(rows));
}

double forward_bytes_per_row(const InputSet& set) {
  const nn::SequenceModel& model = set.model();
  const auto element = static_cast<double>(dtype_size(model.parameters().front().dtype()));
  double bytes = 0;
  for (const nn::HookPointInfo& point : nn::hook_points(model, set.groups.front().batch)) {
    bytes += static_cast<double>(numel(point.shape)) * element;
  }
  return bytes;
}

void for_each_batch(
    const InputSet& set, int64_t rows,
    const std::function<void(const InputGroup& group, const nn::SequenceBatch& batch,
                             int64_t first)>& visit) {
  for (const InputGroup& group : set.groups) {
    const int64_t R = group.batch.inputs.shape.at(0);
    for (int64_t first = 0; first < R; first += rows) {
      const int64_t count = std::min(rows, R - first);
      visit(group, nn::rows_of(group.batch, first, count), first);
    }
  }
}

void for_each_pair_batch(
    const InputSet& clean, const InputSet& corrupt, int64_t rows,
    const std::function<void(const nn::SequenceBatch& clean, const nn::SequenceBatch& corrupt,
                             int64_t first_example)>& visit) {
  for_each_batch(
      clean, rows, [&](const InputGroup& group, const nn::SequenceBatch& batch, int64_t first) {
        const size_t index = static_cast<size_t>(&group - clean.groups.data());
        visit(batch, nn::rows_of(corrupt.groups[index].batch, first, batch.inputs.shape.at(0)),
              group.examples[static_cast<size_t>(first)]);
      });
}

std::vector<int64_t> answer_positions(const nn::SequenceBatch& batch, bool text) {
  const int64_t R = batch.targets.shape.at(0), T = batch.targets.shape.at(1);
  std::vector<int64_t> positions(static_cast<size_t>(R), T - 1);
  if (text) return positions;
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t t = T - 1; t >= 0; --t) {
      if (batch.targets.values[static_cast<size_t>(r * T + t)] != nn::kIgnoreTarget) {
        positions[static_cast<size_t>(r)] = t;
      }
    }
  }
  return positions;
}

std::string described(const InputSet& set, const InputSetArgs& s) {
  const std::string n = format_number(set.examples);
  const std::string plural = set.examples == 1 ? "" : "s";
  if (!s.given) return "1 prompt";
  if (!s.data.empty()) return n + " prompt" + plural + " of --data " + s.data;
  return n + " held-out row" + plural;
}

}  // namespace gradlab::cli
