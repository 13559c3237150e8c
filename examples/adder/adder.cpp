// A task of your own, trained through train::fit: adding two numbers digit by digit (as
// minGPT's adder does). The prompt is the digits of a and of b, most significant first; the
// answer is the digits of a + b, least significant first, the order in which a person carries.
// A custom Observer prints the evaluations; the program exits 0 once held-out exact match
// reaches the target, 1 otherwise.
//
//   adder [DIR]   with DIR, checkpoints go there, and SIGTERM or SIGINT stops the run with a
//                 checkpoint (exit 0); `gradlab inspect DIR/step-*.h5` reads it, and
//                 `gradlab predict --checkpoint DIR/step-*.h5 --input "3 4 6 9 0"` decodes
//                 23 + 58 from raw token ids (the prompt, then the separator 0).
#include <gradlab/gradlab.h>
#include <cstdio>
#include <memory>
#include <vector>

using namespace gradlab;

constexpr int64_t kDigits = 2;                  // of each operand, 0..99
constexpr int64_t kPromptLength = 2 * kDigits;  // a then b
constexpr int64_t kAnswerLength = kDigits + 1;  // the sum, with its carry digit
constexpr int64_t kSeparator = 0;               // token 0; digit d is token d + 1
constexpr int64_t kVocabulary = 11;

// One sample: a's digits, b's digits, separator, the sum's digits reversed.
std::vector<int64_t> addition(int64_t a, int64_t b) {
  std::vector<int64_t> tokens;
  for (int64_t number : {a, b}) {
    tokens.push_back(number / 10 + 1);  // tens
    tokens.push_back(number % 10 + 1);  // units
  }
  tokens.push_back(kSeparator);
  for (int64_t sum = a + b, i = 0; i < kAnswerLength; ++i, sum /= 10)
    tokens.push_back(sum % 10 + 1);
  return tokens;
}

// Batches as a pure function of the step (the held-out set from a stream no step uses), read
// laid out by the model's own make_batch of "prompt, separator, answer".
class AdditionData : public train::DataSource {
 public:
  AdditionData(std::shared_ptr<const nn::SequenceModel> model, int64_t batch_size)
      : model_(std::move(model)), batch_size_(batch_size) {}

  nn::SequenceBatch training_batch(int64_t step) const override {
    return draw(static_cast<uint64_t>(step), batch_size_);
  }
  nn::SequenceBatch heldout() const override { return draw(~0ULL, 500); }

 private:
  nn::SequenceBatch draw(uint64_t stream, int64_t count) const {
    Generator gen(stream * 0x9E3779B97F4A7C15ULL + 1);
    std::vector<int64_t> values;
    for (int64_t i = 0; i < count; ++i) {
      const std::vector<int64_t> s = addition(gen.below(100), gen.below(100));
      values.insert(values.end(), s.begin(), s.end());
    }
    const int64_t length = kPromptLength + 1 + kAnswerLength;
    return model_->make_batch(Indices({count, length}, values), kPromptLength);
  }

  std::shared_ptr<const nn::SequenceModel> model_;
  int64_t batch_size_;
};

// Progress in our own words.
class Report : public train::Observer {
 public:
  void on_step(int64_t step, const train::StepResult&) override {
    if (step != 1) return;
    std::printf("training\n");  // from here on, a stop signal leaves a checkpoint
    std::fflush(stdout);
  }
  void on_evaluation(int64_t step, const train::StepResult& last,
                     const train::Metrics& m) override {
    std::printf("step %5lld  train loss %.4f  held-out loss %.4f  exact %.1f%%\n",
                static_cast<long long>(step), last.loss, m.loss, 100 * m.exact_match);
  }
};

int main(int argc, char** argv) {
  // One thread, as the gradlab tool runs by default: a model this small gains little from more.
  // (A program that sets more calls make_idle_threads_sleep(argv) first.)
  set_threads(1);

  nn::ModelConfig net;
  net.vocab_size = kVocabulary;
  net.max_len = nn::positions_needed("decoder", kPromptLength, kAnswerLength);
  net.d_model = 64;
  net.attention.num_heads = 4;
  net.num_layers = 2;
  const std::shared_ptr<nn::SequenceModel> model = nn::make_sequence_model("decoder", net);

  train::TrainerOptions options;
  options.schedule.lr = 3e-3;
  options.schedule.warmup_steps = 100;
  train::Trainer trainer(model, train::make_optimizer({}, model->named_parameters()),
                         std::make_shared<AdditionData>(model, 128), options);

  train::LoopPolicy policy;
  policy.steps = 3000;
  policy.eval_every = 100;
  policy.target_exact_match = 0.99;
  if (argc > 1) policy.out_dir = argv[1];  // the final checkpoint: step-NNNNNN.h5
  policy.stop_on_signal = true;
  Report report;
  const train::FitResult result = train::fit(trainer, policy, report);
  if (result.reason == train::StopReason::Signal) {
    std::printf("stopped by a signal at step %lld; checkpoint %s\n",
                static_cast<long long>(trainer.step()), result.checkpoint.c_str());
    return 0;
  }

  for (const auto& [a, b] : {std::pair<int64_t, int64_t>{23, 58}, {99, 99}, {7, 40}}) {
    const std::vector<int64_t> sample = addition(a, b);
    const std::vector<int64_t> prompt(sample.begin(), sample.begin() + kPromptLength);
    const std::vector<int64_t> answer = model->greedy_decode(prompt, kSeparator, kAnswerLength);
    int64_t sum = 0;
    for (int64_t i = kAnswerLength - 1; i >= 0; --i) sum = sum * 10 + (answer[i] - 1);
    std::printf("%lld + %lld = %lld%s\n", static_cast<long long>(a), static_cast<long long>(b),
                static_cast<long long>(sum), sum == a + b ? "" : "  (wrong)");
  }
  const bool reached = result.reason == train::StopReason::Target;
  std::printf("%s after %lld steps\n", reached ? "target reached" : "target missed",
              static_cast<long long>(trainer.step()));
  return reached ? 0 : 1;
}
