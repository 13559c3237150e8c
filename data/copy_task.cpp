// copy, reverse and sort: the answer is the prompt itself, reversed, or sorted ascending
// (repeats kept), n tokens for n.
#include <algorithm>
#include <memory>

#include "data/sequence_task.h"
#include "data/task_rows.h"

namespace gradlab::data {
namespace {

// A task whose answer is a rearrangement of the whole prompt.
class PermutationTask : public SequenceTask {
 public:
  using Rearrange = void (*)(std::vector<int64_t>&);
  PermutationTask(const TaskConfig& config, Rearrange rearrange)
      : SequenceTask(config.name, config.sequence), rearrange_(rearrange) {}
  int64_t prompt_length() const override { return length(); }
  int64_t answer_length() const override { return length(); }

 private:
  std::vector<int64_t> answer_of(const std::vector<int64_t>& prompt) const override {
    std::vector<int64_t> a = prompt;
    rearrange_(a);
    return a;
  }
  Rearrange rearrange_;
};

}  // namespace

std::shared_ptr<Task> make_copy_task(const TaskConfig& config) {
  return std::make_shared<PermutationTask>(config, [](std::vector<int64_t>&) {});
}

std::shared_ptr<Task> make_reverse_task(const TaskConfig& config) {
  return std::make_shared<PermutationTask>(
      config, [](std::vector<int64_t>& a) { std::reverse(a.begin(), a.end()); });
}

std::shared_ptr<Task> make_sort_task(const TaskConfig& config) {
  return std::make_shared<PermutationTask>(
      config, [](std::vector<int64_t>& a) { std::sort(a.begin(), a.end()); });
}

}  // namespace gradlab::data
