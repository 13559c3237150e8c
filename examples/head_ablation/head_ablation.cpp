// Which attention head matters most? A 2-layer, 4-head model learns to reverse 6 symbols; then
// each head in turn is knocked out (its z, the weighted sum of values, set to zero through the
// hook point blocks.<i>.attn.hook_z) and the held-out loss measured against the intact model's.
// Exits 0 when the model learned the task and knocking out some head hurt it, 1 otherwise.
#include <gradlab/gradlab.h>
#include <cstdio>

using namespace gradlab;

constexpr int64_t kLength = 6;   // prompt and answer
constexpr int64_t kSymbols = 8;  // tokens 1..8; 0 is the separator
constexpr int64_t kSeparator = 0;

// Prompts of random symbols and their reversals, laid out by the model's make_batch.
class ReverseData : public train::DataSource {
 public:
  ReverseData(std::shared_ptr<const nn::SequenceModel> model) : model_(std::move(model)) {}
  nn::SequenceBatch training_batch(int64_t step) const override {
    return draw(static_cast<uint64_t>(step), 64);
  }
  nn::SequenceBatch heldout() const override { return draw(~0ULL, 256); }

 private:
  nn::SequenceBatch draw(uint64_t stream, int64_t count) const {
    Generator gen(stream * 0x9E3779B97F4A7C15ULL + 7);
    std::vector<int64_t> values;
    for (int64_t i = 0; i < count; ++i) {
      std::vector<int64_t> prompt;
      for (int64_t t = 0; t < kLength; ++t) prompt.push_back(1 + gen.below(kSymbols));
      values.insert(values.end(), prompt.begin(), prompt.end());
      values.push_back(kSeparator);
      values.insert(values.end(), prompt.rbegin(), prompt.rend());
    }
    return model_->make_batch(Indices({count, 2 * kLength + 1}, values), kLength);
  }
  std::shared_ptr<const nn::SequenceModel> model_;
};

int main() {
  set_threads(1);
  nn::ModelConfig net;
  net.vocab_size = kSymbols + 1;
  net.max_len = nn::positions_needed("decoder", kLength, kLength);
  net.d_model = 32;
  net.attention.num_heads = 4;
  net.num_layers = 2;
  net.feed_forward.d_ff = 64;
  const std::shared_ptr<nn::SequenceModel> model = nn::make_sequence_model("decoder", net);
  const auto data = std::make_shared<ReverseData>(model);
  train::TrainerOptions options;
  options.schedule.lr = 3e-3;
  options.schedule.warmup_steps = 50;
  train::Trainer trainer(model, train::make_optimizer({}, model->named_parameters()), data,
                         options);
  train::LoopPolicy policy;
  policy.steps = 2000;
  policy.eval_every = 100;
  policy.target_exact_match = 0.99;
  train::Observer quiet;
  const train::FitResult result = train::fit(trainer, policy, quiet);
  std::printf("trained %lld steps\n", static_cast<long long>(trainer.step()));

  nn::EvalScope eval(*model);
  NoGradGuard no_grad;
  const nn::SequenceBatch heldout = data->heldout();
  const double intact = model->loss(heldout).item();
  std::printf("intact held-out loss %.4f\n\nloss with one head's z zeroed:\n        ", intact);
  for (int64_t h = 0; h < net.attention.num_heads; ++h)
    std::printf("  head %lld", static_cast<long long>(h));
  double worst = intact;
  int64_t worst_layer = -1, worst_head = -1;
  for (int64_t layer = 0; layer < net.num_layers; ++layer) {
    std::printf("\nlayer %lld", static_cast<long long>(layer));
    for (int64_t head = 0; head < net.attention.num_heads; ++head) {
      const std::string point = "blocks." + std::to_string(layer) + ".attn.hook_z";
      const Tensor logits = nn::run_with_hooks(
          *model, heldout, {{point, [&](const Tensor& z, const std::string&) {
                               return nn::zero_head(z, 2, head);  // z [B, T, H, D]
                             }}});
      const double loss = nn::sequence_loss(logits, heldout).item();
      std::printf("  %6.3f", loss);
      if (loss > worst) {
        worst = loss;
        worst_layer = layer;
        worst_head = head;
      }
    }
  }
  std::printf("\n\n");
  if (worst_layer < 0) {
    std::printf("no head's ablation raised the loss\n");
    return 1;
  }
  std::printf("most important head: layer %lld head %lld (loss %.3f against %.4f intact)\n",
              static_cast<long long>(worst_layer), static_cast<long long>(worst_head), worst,
              intact);
  const bool learned = result.reason == train::StopReason::Target;
  std::printf("%s\n", learned ? "learned the task" : "did NOT learn the task");
  return learned ? 0 : 1;
}
