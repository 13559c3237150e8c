#include "data/task.h"

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/format.h"
#include "data/streams.h"

namespace gradlab::data {
namespace {

using Sequence = std::vector<int64_t>;

bool is_recall(const TaskConfig& c) {
  return c.name == "recall";
}

void require_positive(const char* what, int64_t value) {
  if (value < 1)
    throw ConfigError(std::string("task: ") + what + " must be >= 1, got " + format_number(value));
}

// count samples drawn in order from gen, as rows of [count, L].
Indices draw(const Task& task, Generator& gen, int64_t count) {
  const int64_t length = task.sample_length();
  std::vector<int64_t> values;
  values.reserve(static_cast<size_t>(count * length));
  for (int64_t i = 0; i < count; ++i) {
    const Sequence s = task.sample(gen);
    values.insert(values.end(), s.begin(), s.end());
  }
  return Indices({count, length}, std::move(values));
}

}  // namespace

Task::Task(const TaskConfig& config) : config_(config) {
  const std::string& n = config.name;
  if (n != "copy" && n != "reverse" && n != "sort" && n != "recall") {
    throw ConfigError("task: unknown task " + quote(n) +
                      " (expected copy, reverse, sort or recall)");
  }
  require_positive("length", config.length);
  require_positive("num_symbols", config.num_symbols);
  if (is_recall(config) && config.num_symbols < config.length) {
    throw ConfigError(
        "task: recall needs num_symbols >= length (keys are distinct), got num_symbols " +
        format_number(config.num_symbols) + " < length " + format_number(config.length));
  }
}

int64_t Task::prompt_length() const {
  return is_recall(config_) ? 2 * config_.length + 1 : config_.length;
}

int64_t Task::answer_length() const {
  return is_recall(config_) ? 1 : config_.length;
}

std::vector<int64_t> Task::sample(Generator& gen) const {
  const int64_t n = config_.length;
  const uint64_t symbols = static_cast<uint64_t>(config_.num_symbols);
  Sequence prompt;
  if (is_recall(config_)) {
    // Keys: the first n entries of a partial Fisher-Yates shuffle of 1..num_symbols.
    Sequence pool(symbols);
    std::iota(pool.begin(), pool.end(), int64_t{1});
    for (uint64_t i = 0; i < static_cast<uint64_t>(n); ++i) {
      std::swap(pool[i], pool[i + gen.below(symbols - i)]);
    }
    for (int64_t i = 0; i < n; ++i) {
      prompt.push_back(pool[static_cast<size_t>(i)]);
      prompt.push_back(static_cast<int64_t>(gen.below(symbols)) + 1);
    }
    prompt.push_back(pool[gen.below(static_cast<uint64_t>(n))]);
  } else {
    for (int64_t i = 0; i < n; ++i) prompt.push_back(static_cast<int64_t>(gen.below(symbols)) + 1);
  }
  Sequence s = prompt;
  s.push_back(kSeparator);
  const Sequence a = answer(prompt);
  s.insert(s.end(), a.begin(), a.end());
  return s;
}

std::vector<int64_t> Task::answer(const std::vector<int64_t>& prompt) const {
  validate_prompt(prompt);
  Sequence a = prompt;
  if (config_.name == "reverse") {
    std::reverse(a.begin(), a.end());
  } else if (config_.name == "sort") {
    std::sort(a.begin(), a.end());
  } else if (is_recall(config_)) {
    size_t i = 0;
    while (prompt[i] != prompt.back()) i += 2;  // validated: the query is one of the keys
    a = {prompt[i + 1]};
  }
  return a;
}

void Task::validate_prompt(const std::vector<int64_t>& prompt) const {
  const int64_t size = static_cast<int64_t>(prompt.size());
  if (size != prompt_length()) {
    throw ConfigError("task: " + config_.name + " prompt has " + format_number(size) +
                      " tokens, expected " + format_number(prompt_length()));
  }
  for (int64_t i = 0; i < size; ++i) {
    const int64_t v = prompt[static_cast<size_t>(i)];
    if (v < 1 || v > config_.num_symbols) {
      throw ConfigError("task: prompt token " + format_number(i) + " is " + format_number(v) +
                        ", outside the data symbols 1.." + format_number(config_.num_symbols));
    }
  }
  if (!is_recall(config_)) return;
  Sequence keys;
  for (int64_t i = 0; i + 1 < size; i += 2) keys.push_back(prompt[static_cast<size_t>(i)]);
  for (size_t i = 0; i < keys.size(); ++i) {
    if (std::find(keys.begin(), keys.begin() + static_cast<int64_t>(i), keys[i]) !=
        keys.begin() + static_cast<int64_t>(i)) {
      throw ConfigError("task: recall prompt repeats key " + format_number(keys[i]));
    }
  }
  if (std::find(keys.begin(), keys.end(), prompt.back()) == keys.end()) {
    throw ConfigError("task: recall query " + format_number(prompt.back()) +
                      " is not one of the keys");
  }
}

Indices Task::samples(uint64_t seed, int64_t step, int64_t batch_size) const {
  if (step < 0) throw ConfigError("task: step must be >= 0, got " + format_number(step));
  require_positive("batch_size", batch_size);
  Generator gen(stream_seed(seed, static_cast<uint64_t>(step)));
  return draw(*this, gen, batch_size);
}

Indices Task::heldout(uint64_t seed, int64_t count) const {
  require_positive("heldout count", count);
  Generator gen(stream_seed(seed, kHeldoutIndex));
  return draw(*this, gen, count);
}

}  // namespace gradlab::data
