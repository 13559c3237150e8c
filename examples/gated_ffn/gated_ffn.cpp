// A layer of your own: a gated feed-forward block (GEGLU, Shazeer 2020),
//   y = W_down (gelu(W_gate x) * (W_up x)),
// written from gradlab's ops and Linear, checked in float64 against central differences with
// the library's gradcheck (every axis a different size, so a swapped axis cannot hide), and then
// trained to imitate a fixed random teacher of the same shape. Exits 0 when the gradients are
// right and the loss falls to a tenth, 1 otherwise.
#include <gradlab/gradlab.h>
#include <cstdio>

using namespace gradlab;

class GatedFeedForward : public nn::Module {
 public:
  GatedFeedForward(int64_t d_model, int64_t d_hidden, Generator& gen) {
    gate = register_module("gate", std::make_shared<nn::Linear>(d_model, d_hidden, gen));
    up = register_module("up", std::make_shared<nn::Linear>(d_model, d_hidden, gen));
    down = register_module("down", std::make_shared<nn::Linear>(d_hidden, d_model, gen));
  }
  // x [B, T, C] -> [B, T, C]
  Tensor forward(const Tensor& x) const {
    return down->forward(gelu(gate->forward(x)) * up->forward(x));  // [B, T, F] inside
  }

  std::shared_ptr<nn::Linear> gate, up, down;
};

// d sum(layer(x) * W) / d (x and every parameter), analytic against numeric, in float64.
bool gradients_are_right() {
  Generator gen(1);
  GatedFeedForward layer(5, 7, gen);  // C = 5, F = 7
  layer.to(DType::Float64);
  const Tensor x = Tensor::randn({2, 3, 5}, gen, DType::Float64);  // B = 2, T = 3
  const GradcheckReport wrt_input =
      gradcheck([&](const std::vector<Tensor>& in) { return layer.forward(in[0]); }, {x});
  const GradcheckReport wrt_parameters =
      gradcheck_tensors([&] { return layer.forward(x); }, layer.parameters());
  std::printf("gradcheck input:      %s\ngradcheck parameters: %s\n", describe(wrt_input).c_str(),
              describe(wrt_parameters).c_str());
  return wrt_input.passed() && wrt_parameters.passed();
}

// Mean squared error against a teacher layer, 300 AdamW steps; true if it falls 10x.
bool learns() {
  Generator gen(2), teacher_gen(3);
  GatedFeedForward student(16, 32, gen), teacher(16, 32, teacher_gen);
  const auto optimizer = train::make_optimizer({}, student.named_parameters());
  double first = 0, last = 0;
  for (int64_t step = 1; step <= 300; ++step) {
    const Tensor x = Tensor::randn({8, 10, 16}, gen);
    Tensor target;
    {
      NoGradGuard no_grad;
      target = teacher.forward(x);
    }
    optimizer->zero_grad();
    const Tensor diff = student.forward(x) - target;
    const Tensor loss = mean(diff * diff);
    loss.backward();
    optimizer->step(1e-2);
    last = loss.item();
    if (step == 1) first = last;
    if (step % 100 == 0) std::printf("step %3lld  loss %.5f\n", static_cast<long long>(step), last);
  }
  return last < first / 10;
}

int main() {
  const bool right = gradients_are_right();
  const bool learned = learns();
  std::printf("%s, %s\n", right ? "gradients right" : "GRADIENTS WRONG",
              learned ? "loss fell tenfold" : "loss did not fall tenfold");
  return right && learned ? 0 : 1;
}
