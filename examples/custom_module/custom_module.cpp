// A module of your own inside gradlab's built-in decoder: Dynamic Tanh (DyT, Zhu et al. 2025),
//   y = weight * tanh(alpha * x) + bias,  alpha one learned scalar,
// a normalisation-free stand-in for LayerNorm, registered under the name "dyt". The copy task's
// decoder then builds it wherever it puts a norm (norm = dyt, as --norm dyt would), trains a
// few steps through the library (the loss must fall), saves a checkpoint that records the name,
// loads it back (the norm registered here is what lets it load), and runs the module gradient
// check the registration added. Exits 0 when all of that holds, 1 otherwise. Positional schemes,
// attention score modifiers and feed-forwards are registered the same way (register_positions,
// register_score_modifier, register_feed_forward; docs/model.md, section 10).
#include <gradlab/gradlab.h>

#include <unistd.h>
#include <cstdio>
#include <filesystem>

using namespace gradlab;

class DynamicTanh : public nn::Norm {
 public:
  DynamicTanh(int64_t dim, bool with_bias) {
    alpha = register_parameter("alpha", Tensor::full({1}, 0.5));
    weight = register_parameter("weight", Tensor::ones({dim}));
    if (with_bias) bias = register_parameter("bias", Tensor::zeros({dim}));
  }
  Tensor alpha, weight, bias;  // [1], [C], [C]

 protected:
  // x [..., C] -> [..., C]
  Tensor normalize(const Tensor& x) const override {
    const Tensor y = tanh(x * alpha) * weight;
    return bias.defined() ? y + bias : y;
  }
};

int main() {
  set_threads(1);
  nn::register_norm("dyt", "Dynamic Tanh, weight * tanh(alpha x) + bias",
                    [](int64_t dim, const nn::ModelConfig& config) {
                      return std::make_shared<DynamicTanh>(dim, config.bias);
                    });

  // The copy task, small: 4 symbols to repeat, a 32-wide decoder of 2 blocks.
  train::RunConfig config;
  config.task.sequence.length = 4;
  config.task.sequence.num_symbols = 6;
  config.net.d_model = 32;
  config.net.feed_forward.d_ff = 64;
  config.net.norm.kind = "dyt";
  config.batch_size = 32;
  config.steps = 60;
  config.schedule.lr = 3e-3;
  config.schedule.warmup_steps = 10;
  config.eval_size = 64;
  train::finalize(config);
  train::Trainer trainer(config);
  const auto* norm = dynamic_cast<const DynamicTanh*>(
      dynamic_cast<nn::DecoderLM&>(trainer.model()).blocks[0]->ln1.get());
  double first = 0, last = 0;
  for (int64_t step = 1; step <= config.steps; ++step) {
    last = trainer.train_step().loss;
    if (step == 1) first = last;
    if (step % 20 == 0) std::printf("step %3lld  loss %.4f\n", static_cast<long long>(step), last);
  }
  const bool learned = norm != nullptr && last < 0.8 * first;
  std::printf("the blocks' norm is %s; loss %.4f -> %.4f\n",
              norm ? "DynamicTanh" : "NOT DynamicTanh", first, last);

  // The checkpoint records norm = dyt; loading rebuilds the model with the norm registered above.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("gradlab-custom-module-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "dyt.h5").string();
  train::save_checkpoint(path, trainer.checkpoint());
  const train::LoadedModel loaded = train::load_model(path);
  bool same = loaded.config.net.norm.kind == "dyt";
  for (const auto& [name, parameter] : trainer.model().named_parameters()) {
    same = same && loaded.model->parameter(name).to_vector() == parameter.to_vector();
  }
  std::filesystem::remove_all(dir);
  std::printf("checkpoint %s\n", same ? "reloaded with the same norm and parameters" : "DIFFERS");

  // The registration added the norm's gradient check, as `gradlab gradcheck` lists it.
  bool right = false;
  for (const nn::ModuleCheck& check : nn::module_checks()) {
    if (check.name != "norm dyt") continue;
    const GradcheckReport report = check.run(0);
    right = report.passed();
    std::printf("gradcheck %s: %s\n", check.name.c_str(), describe(report).c_str());
  }
  return learned && same && right ? 0 : 1;
}
