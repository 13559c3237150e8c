// Module gradient checks: B, T, C, H, D and friends all differ in every case.
#include "nn/module_checks.h"

#include <mutex>
#include "autograd/ops.h"

#include "nn/hooks.h"
#include "nn/models.h"
#include "nn/module_registry.h"
#include "nn/toy_model.h"

namespace gradlab::nn {
namespace {

// Moves module to float64 and replaces every parameter with normal * 0.5, so that zero biases
// and unit LayerNorm weights cannot hide a wrong gradient.
void randomize(Module& module, Generator& gen) {
  module.to(DType::Float64);
  for (Tensor p : module.parameters()) {
    p.set_data(Tensor::randn(p.shape(), gen, DType::Float64, 0.0, 0.5));
  }
}

// Checks fn(inputs) with respect to every input (random, of the given shapes) and every
// parameter of module.
GradcheckReport check_with_inputs(Module& module, const std::vector<Shape>& shapes, uint64_t seed,
                                  const std::function<Tensor(const std::vector<Tensor>&)>& fn) {
  Generator gen(seed);
  randomize(module, gen);
  std::vector<Tensor> inputs;
  for (const Shape& shape : shapes) {
    inputs.push_back(Tensor::randn(shape, gen, DType::Float64).set_requires_grad());
  }
  std::vector<Tensor> wrt = inputs;
  for (const Tensor& p : module.parameters()) wrt.push_back(p);
  return gradcheck_tensors([&] { return fn(inputs); }, wrt, {.seed = seed});
}

GradcheckReport check_with_input(Module& module, const Shape& x_shape, uint64_t seed,
                                 const std::function<Tensor(const Tensor&)>& fn) {
  return check_with_inputs(module, {x_shape}, seed,
                           [&](const std::vector<Tensor>& in) { return fn(in[0]); });
}

GradcheckReport check_parameters(Module& module, uint64_t seed, const std::function<Tensor()>& fn,
                                 int64_t elements_per_tensor = 0) {
  Generator gen(seed);
  randomize(module, gen);
  return gradcheck_tensors(fn, module.parameters(),
                           {.seed = seed, .elements_per_tensor = elements_per_tensor});
}

// A whole model's check: its layers' checks above perturb every element of their parameters;
// this one tests how the model wires them together, on a sample of each parameter's elements
// (GradcheckOptions::elements_per_tensor).
GradcheckReport check_model(Module& module, uint64_t seed, const std::function<Tensor()>& fn) {
  return check_parameters(module, seed, fn, 24);
}

Mask padding(const Shape& shape, const std::vector<uint8_t>& values) {
  return Mask(shape, values);
}

ModuleCheck attention_check(std::string name, std::string sizes, AttentionConfig config,
                            Shape query_shape, int64_t tk, AttentionMasks masks) {
  return {std::move(name), std::move(sizes), [=](uint64_t seed) {
            Generator init(seed);
            MultiHeadAttention attn(config, init);
            if (tk == query_shape[1]) {
              return check_with_input(attn, query_shape, seed,
                                      [&](const Tensor& x) { return attn.forward(x, masks); });
            }
            const Shape kv_shape{query_shape[0], tk, query_shape[2]};
            return check_with_inputs(
                attn, {query_shape, kv_shape}, seed,
                [&](const std::vector<Tensor>& in) { return attn.forward(in[0], in[1], masks); });
          }};
}

std::vector<ModuleCheck> make_checks() {
  std::vector<ModuleCheck> checks;
  checks.push_back({"Linear", "[2,3,5] -> 7", [](uint64_t seed) {
                      Generator gen(seed);
                      Linear layer(5, 7, gen);
                      return check_with_input(layer, {2, 3, 5}, seed,
                                              [&](const Tensor& x) { return layer.forward(x); });
                    }});
  checks.push_back({"Embedding", "V=7 C=5 ids [2,3]", [](uint64_t seed) {
                      Generator gen(seed);
                      Embedding layer(7, 5, gen);
                      const Indices ids({2, 3}, {6, 0, 6, 2, 3, 1});
                      return check_parameters(layer, seed, [&] { return layer.forward(ids); });
                    }});
  checks.push_back({"LayerNorm", "[2,3,5]", [](uint64_t seed) {
                      LayerNorm layer(5);
                      return check_with_input(layer, {2, 3, 5}, seed,
                                              [&](const Tensor& x) { return layer.forward(x); });
                    }});
  checks.push_back({"FeedForward", "[2,3,5] d_ff=7", [](uint64_t seed) {
                      Generator gen(seed);
                      FeedForward layer(5, {.d_ff = 7}, gen);
                      return check_with_input(layer, {2, 3, 5}, seed,
                                              [&](const Tensor& x) { return layer.forward(x); });
                    }});
  checks.push_back({"FeedForward ReLU", "[2,3,5] d_ff=7", [](uint64_t seed) {
                      Generator gen(seed);
                      FeedForward layer(5, {.d_ff = 7, .activation = kRelu}, gen);
                      return check_with_input(layer, {2, 3, 5}, seed,
                                              [&](const Tensor& x) { return layer.forward(x); });
                    }});

  const AttentionConfig mha{.d_model = 12, .num_heads = 3};
  AttentionMasks causal_padding;
  causal_padding.causal = true;
  causal_padding.key_padding_mask = padding({2, 5}, {0, 0, 0, 0, 0, 0, 0, 0, 1, 1});
  AttentionMasks cross_padding;
  cross_padding.key_padding_mask = padding({2, 7}, {0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0});
  AttentionMasks fully_masked;  // every key of batch element 1 is padding
  fully_masked.key_padding_mask = padding({2, 5}, {0, 1, 0, 0, 0, 1, 1, 1, 1, 1});
  AttentionMasks causal;
  causal.causal = true;
  checks.push_back(attention_check("MHA self", "B=2 T=5 C=12 H=3 D=4", mha, {2, 5, 12}, 5, {}));
  checks.push_back(attention_check("MHA causal+padding", "B=2 T=5 C=12 H=3 D=4", mha, {2, 5, 12}, 5,
                                   causal_padding));
  checks.push_back(attention_check("MHA cross", "B=2 Tq=5 Tk=7 C=12 H=3 D=4", mha, {2, 5, 12}, 7,
                                   cross_padding));
  checks.push_back(attention_check("MHA fully masked row", "B=2 T=5 C=12 H=3 D=4", mha, {2, 5, 12},
                                   5, fully_masked));
  checks.push_back(attention_check("GQA", "B=3 T=5 C=24 H=4 KV=2 D=6",
                                   {.d_model = 24, .num_heads = 4, .num_kv_heads = 2}, {3, 5, 24},
                                   5, causal));
  checks.push_back(attention_check("MQA cross", "B=2 Tq=5 Tk=7 C=12 H=3 KV=1 D=4",
                                   {.d_model = 12, .num_heads = 3, .num_kv_heads = 1}, {2, 5, 12},
                                   7, {}));
  // An additive mask sends a call down the composed path (the tutorial's steps, one op each).
  Generator additive_gen(3);
  AttentionMasks composed_cross = cross_padding;
  composed_cross.additive_mask = Tensor::randn({5, 7}, additive_gen, DType::Float64);  // [Tq, Tk]
  AttentionMasks composed_gqa = causal;
  composed_gqa.additive_mask =
      Tensor::randn({4, 1, 5}, additive_gen, DType::Float64);  // [H, 1, Tk]
  checks.push_back(attention_check("MHA composed cross", "B=2 Tq=5 Tk=7 C=12 H=3 D=4", mha,
                                   {2, 5, 12}, 7, composed_cross));
  checks.push_back(attention_check("GQA composed", "B=3 T=5 C=24 H=4 KV=2 D=6",
                                   {.d_model = 24, .num_heads = 4, .num_kv_heads = 2}, {3, 5, 24},
                                   5, composed_gqa));

  // The default wirings, then the toy-model options: no norm (plain residual sums either way),
  // a ReLU feed-forward, attention-only blocks.
  const struct {
    const char* name;
    const char* sizes;
    int64_t d_ff;
    bool pre_norm;
    const char* norm;
    const char* activation;
  } blocks[] = {
      {"Block pre-LN", "B=2 T=5 C=12 H=3 F=7", 7, true, kLayerNorm, kGelu},
      {"Block post-LN", "B=2 T=5 C=12 H=3 F=7", 7, false, kLayerNorm, kGelu},
      {"Block no norm, ReLU", "B=2 T=5 C=12 H=3 F=7", 7, true, kNoNorm, kRelu},
      {"Block post-LN wiring, no norm", "B=2 T=5 C=12 H=3 F=7", 7, false, kNoNorm, kGelu},
      {"Block attention-only", "B=2 T=5 C=12 H=3 F=0", 0, true, kLayerNorm, kGelu},
      {"Block attention-only, no norm", "B=2 T=5 C=12 H=3 F=0", 0, true, kNoNorm, kGelu},
  };
  for (const auto& b : blocks) {
    const ModelConfig config{.d_model = 12,
                             .attention = {.num_heads = 3},
                             .norm = {.kind = b.norm},
                             .feed_forward = {.d_ff = b.d_ff, .activation = b.activation},
                             .block = {.pre_norm = b.pre_norm}};
    checks.push_back({b.name, b.sizes, [config](uint64_t seed) {
                        Generator gen(seed);
                        TransformerBlock block(config, gen);
                        AttentionMasks masks;
                        masks.causal = true;
                        return check_with_input(block, {2, 5, 12}, seed, [&](const Tensor& x) {
                          return block.forward(x, masks);
                        });
                      }});
  }
  checks.push_back(
      {"Block cross-attention", "B=2 T=5 S=7 C=12 H=3 F=20", [](uint64_t seed) {
         Generator gen(seed);
         TransformerBlock block(
             {.d_model = 12, .attention = {.num_heads = 3}, .feed_forward = {.d_ff = 20}}, gen,
             nullptr, BlockAttention::SelfAndCross);
         AttentionMasks masks;
         masks.causal = true;
         return check_with_inputs(
             block, {{2, 5, 12}, {2, 7, 12}}, seed,
             [&](const std::vector<Tensor>& in) { return block.forward(in[0], masks, in[1]); });
       }});

  // The toy model of superposition and its loss: I = 4 instances, m = 2, n = 5, B = 3.
  checks.push_back({"ToyModel", "B=3 I=4 m=2 n=5", [](uint64_t seed) {
                      ToyModel model({.vocab_size = 5, .max_len = 4, .d_model = 2, .seed = seed});
                      return check_with_input(model, {3, 4, 5}, seed, [&](const Tensor& x) {
                        SequenceBatch batch;
                        batch.features = x;
                        return model.loss(batch) + sum(model.forward(batch) * x);
                      });
                    }});

  const ModelConfig tiny{.vocab_size = 7,
                         .max_len = 6,
                         .d_model = 12,
                         .num_layers = 2,
                         .attention = {.num_heads = 3},
                         .feed_forward = {.d_ff = 20}};
  checks.push_back({"DecoderLM", "V=7 B=2 T=5 C=12 H=3 L=2 F=20", [tiny](uint64_t seed) {
                      DecoderLM model(tiny);
                      const Indices tokens({2, 5}, {1, 4, 6, 0, 2, 3, 3, 5, 1, 0});
                      return check_model(model, seed, [&] { return model.forward(tokens); });
                    }});
  // A backward hook that passes the gradient on (nn/hooks.h's identity node) changes none.
  checks.push_back(
      {"DecoderLM with backward hooks", "V=7 B=2 T=5 C=12 H=3 L=2 F=20", [tiny](uint64_t seed) {
         DecoderLM model(tiny);
         const SequenceBatch batch =
             model.make_batch(Indices({2, 6}, {1, 4, 6, 0, 2, 3, 3, 5, 1, 0, 2, 6}), 2);
         const HookFunction pass_on = [](const Tensor&, const std::string&) { return Tensor(); };
         return check_model(model, seed, [&] {
           const HookScope hooks(model, batch,
                                 {{"blocks.*.hook_resid_mid", pass_on, HookDirection::Backward}});
           return model.forward(batch);
         });
       }});
  // The GPT-style options: no biases anywhere, the head tied to the token embedding (its
  // gradient sums the embedding's and the head's), gpt2 initialisation, grouped K/V heads.
  ModelConfig gpt = tiny;
  gpt.attention = {.num_heads = 4, .num_kv_heads = 2};
  gpt.d_model = 16;
  gpt.bias = false;
  gpt.embedding.tie_embeddings = true;
  gpt.init = kGpt2Init;
  checks.push_back({"DecoderLM (no bias, tied, gpt2)", "V=7 B=2 T=5 C=16 H=4 KV=2 L=2 F=20",
                    [gpt](uint64_t seed) {
                      DecoderLM model(gpt);
                      const Indices tokens({2, 5}, {1, 4, 6, 0, 2, 3, 3, 5, 1, 0});
                      return check_model(model, seed, [&] { return model.forward(tokens); });
                    }});
  // The toy-transformer setups: Nanda et al.'s grokking model (no LayerNorm, ReLU, no biases)
  // and Olsson et al.'s attention-only models.
  ModelConfig grokking = tiny;
  grokking.num_layers = 1;
  grokking.norm.kind = kNoNorm;
  grokking.feed_forward.activation = kRelu;
  grokking.bias = false;
  checks.push_back({"DecoderLM (no norm, ReLU, no bias)", "V=7 B=2 T=5 C=12 H=3 L=1 F=20",
                    [grokking](uint64_t seed) {
                      DecoderLM model(grokking);
                      const Indices tokens({2, 5}, {1, 4, 6, 0, 2, 3, 3, 5, 1, 0});
                      return check_model(model, seed, [&] { return model.forward(tokens); });
                    }});
  // ALiBi in every self-attention layer and no position table, as ALiBi models are usually built.
  ModelConfig alibi = tiny;
  alibi.embedding.positions = kNoPositions;
  alibi.attention.score_modifier = kAlibi;
  checks.push_back(
      {"DecoderLM (ALiBi, no positions)", "V=7 B=2 T=5 C=12 H=3 L=2 F=20", [alibi](uint64_t seed) {
         DecoderLM model(alibi);
         const Indices tokens({2, 5}, {1, 4, 6, 0, 2, 3, 3, 5, 1, 0});
         return check_model(model, seed, [&] { return model.forward(tokens); });
       }});
  ModelConfig attention_only = tiny;
  attention_only.feed_forward.d_ff = 0;
  attention_only.norm.kind = kNoNorm;
  checks.push_back({"DecoderLM (attention-only, no norm)", "V=7 B=2 T=5 C=12 H=3 L=2 F=0",
                    [attention_only](uint64_t seed) {
                      DecoderLM model(attention_only);
                      const Indices tokens({2, 5}, {1, 4, 6, 0, 2, 3, 3, 5, 1, 0});
                      return check_model(model, seed, [&] { return model.forward(tokens); });
                    }});
  // One layer each: without a norm, the activations of random parameters grow with every
  // sublayer, and in two encoder and two decoder layers the rounding noise of the central
  // differences exceeds the tolerance on gradients that are nearly zero (the key bias's).
  ModelConfig seq2seq_options = tiny;
  seq2seq_options.num_layers = 1;
  seq2seq_options.norm.kind = kNoNorm;
  seq2seq_options.feed_forward.activation = kRelu;
  for (const auto& [name, config] :
       {std::pair{"EncoderDecoder", tiny},
        std::pair{"EncoderDecoder (no norm, ReLU)", seq2seq_options},
        std::pair{"EncoderDecoder (attention-only, no norm)", attention_only}}) {
    checks.push_back({name,
                      "V=7 B=2 S=5 T=4 C=12 H=3 L=" + std::to_string(config.num_layers) +
                          " F=" + std::to_string(config.feed_forward.d_ff),
                      [config](uint64_t seed) {
                        EncoderDecoder model(config);
                        const Indices source({2, 5}, {1, 4, 6, 0, 2, 3, 3, 5, 1, 0});
                        const Indices target({2, 4}, {0, 2, 5, 6, 0, 1, 1, 4});
                        return check_model(model, seed,
                                           [&] { return model.forward(source, target); });
                      }});
  }
  return checks;
}

// The check of every registered norm, positional scheme, score modifier and feed-forward
// (nn/module_registry.h), built through its factory: C = 5, F = 7, input [B, T, C] = [2, 3, 5];
// positions 2 to 4 of 6; a score modifier in a cross-attention of B = 2, H = 3, Tq = 5,
// Tk = 7, D = 4.
std::vector<ModuleCheck> registered_module_checks() {
  std::vector<ModuleCheck> checks;
  for (const auto& row : norm_registry().rows()) {
    if (!row.make(1, ModelConfig{})) continue;  // "none": no module to check
    checks.push_back({"norm " + row.name, "[2,3,5]", [make = row.make](uint64_t seed) {
                        const std::shared_ptr<Norm> norm = make(5, ModelConfig{.d_model = 5});
                        return check_with_input(*norm, {2, 3, 5}, seed,
                                                [&](const Tensor& x) { return norm->forward(x); });
                      }});
  }
  const ModelConfig positions_config{.max_len = 6, .d_model = 5};
  for (const auto& row : positions_registry().rows()) {
    Generator probe(0);
    if (!row.make(positions_config, probe)) continue;  // "none"
    checks.push_back({"positions " + row.name, "[2,3,5] at 2..4 of 6",
                      [make = row.make, positions_config](uint64_t seed) {
                        Generator gen(seed);
                        const std::shared_ptr<PositionalScheme> positions =
                            make(positions_config, gen);
                        return check_with_input(*positions, {2, 3, 5}, seed, [&](const Tensor& x) {
                          return x + positions->forward(3, 2, x.dtype());
                        });
                      }});
  }
  const ModelConfig modifier_config{.d_model = 12, .attention = {.num_heads = 3}};
  for (const auto& row : score_modifier_registry().rows()) {
    Generator probe(0);
    if (!row.make(modifier_config, probe)) continue;  // "none"
    checks.push_back({"score modifier " + row.name, "B=2 Tq=5 Tk=7 C=12 H=3 D=4",
                      [make = row.make, modifier_config](uint64_t seed) {
                        Generator gen(seed);
                        MultiHeadAttention attn(attention_config(modifier_config), gen, nullptr,
                                                make(modifier_config, gen));
                        // No mask: every query reads keys on both sides of its own position.
                        return check_with_inputs(attn, {{2, 5, 12}, {2, 7, 12}}, seed,
                                                 [&](const std::vector<Tensor>& in) {
                                                   return attn.forward(in[0], in[1]);
                                                 });
                      }});
  }
  for (const auto& row : feed_forward_registry().rows()) {
    checks.push_back(
        {"feed-forward " + row.name, "[2,3,5] d_ff=7", [make = row.make](uint64_t seed) {
           Generator gen(seed);
           const std::shared_ptr<Sublayer> ffn =
               make(ModelConfig{.d_model = 5, .feed_forward = {.d_ff = 7}}, gen);
           return check_with_input(*ffn, {2, 3, 5}, seed,
                                   [&](const Tensor& x) { return ffn->forward(x); });
         }});
  }
  return checks;
}

std::mutex checks_mutex;
std::vector<ModuleCheck>& added_checks() {
  static std::vector<ModuleCheck> checks;
  return checks;
}

}  // namespace

void register_module_check(ModuleCheck check) {
  const std::lock_guard<std::mutex> lock(checks_mutex);
  added_checks().push_back(std::move(check));
}

const std::vector<ModuleCheck>& module_checks() {
  static const std::vector<ModuleCheck> built_in = make_checks();
  static std::vector<ModuleCheck> all;
  const std::lock_guard<std::mutex> lock(checks_mutex);
  std::vector<ModuleCheck> now = built_in;
  for (ModuleCheck& check : registered_module_checks()) now.push_back(std::move(check));
  now.insert(now.end(), added_checks().begin(), added_checks().end());
  if (now.size() != all.size()) all = std::move(now);
  return all;
}

}  // namespace gradlab::nn
