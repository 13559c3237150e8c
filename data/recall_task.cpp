// recall: n key-value pairs with distinct keys, then a query key; the answer is its value.
#include <algorithm>
#include <memory>
#include <numeric>

#include "autograd/error.h"
#include "autograd/format.h"
#include "data/sequence_task.h"
#include "data/task_rows.h"

namespace gradlab::data {
namespace {

using Sequence = std::vector<int64_t>;

class RecallTask : public SequenceTask {
 public:
  explicit RecallTask(const TaskConfig& config) : SequenceTask(config.name, config.sequence) {
    if (num_symbols() < length()) {
      throw ConfigError(
          "task: recall needs --symbols >= --length (keys are distinct), got --symbols " +
          format_number(num_symbols()) + " < --length " + format_number(length()));
    }
  }
  int64_t prompt_length() const override { return 2 * length() + 1; }
  int64_t answer_length() const override { return 1; }

 private:
  Sequence draw_prompt(Generator& gen) const override {
    const int64_t n = length();
    const uint64_t symbols = static_cast<uint64_t>(num_symbols());
    // Keys: the first n entries of a partial Fisher-Yates shuffle of 1..num_symbols.
    Sequence pool(symbols);
    std::iota(pool.begin(), pool.end(), int64_t{1});
    for (uint64_t i = 0; i < static_cast<uint64_t>(n); ++i) {
      std::swap(pool[i], pool[i + gen.below(symbols - i)]);
    }
    Sequence prompt;
    for (int64_t i = 0; i < n; ++i) {
      prompt.push_back(pool[static_cast<size_t>(i)]);
      prompt.push_back(static_cast<int64_t>(gen.below(symbols)) + 1);
    }
    prompt.push_back(pool[gen.below(static_cast<uint64_t>(n))]);
    return prompt;
  }

  Sequence answer_of(const Sequence& prompt) const override {
    size_t i = 0;
    while (prompt[i] != prompt.back()) i += 2;  // validated: the query is one of the keys
    return {prompt[i + 1]};
  }

  void check_prompt(const Sequence& prompt) const override {
    Sequence keys;
    for (size_t i = 0; i + 1 < prompt.size(); i += 2) keys.push_back(prompt[i]);
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
};

}  // namespace

std::shared_ptr<Task> make_recall_task(const TaskConfig& config) {
  return std::make_shared<RecallTask>(config);
}

}  // namespace gradlab::data
