// `gradlab explain`: the attention tutorial's worked example and shape walk, computed by the real
// MultiHeadAttention module (its trace of intermediates), not by a separate code path.
#include <boost/program_options.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "autograd/format.h"
#include "autograd/ops.h"
#include "cli/command_table.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "nn/attention.h"

namespace gradlab::cli {
namespace {

// Prints a [rows, cols] slice of a rank-2 tensor with 4 decimals, indented.
void print_matrix(const Tensor& m) {
  for (int64_t r = 0; r < m.size(0); ++r) {
    std::printf("    [");
    for (int64_t c = 0; c < m.size(1); ++c) std::printf("%s%7.4f", c ? " " : "", m.at({r, c}));
    std::printf(" ]\n");
  }
}

// Element [0, head] of a [1, H, T, X] tensor as a [T, X] matrix.
Tensor head_of(const Tensor& t, int64_t head) {
  return reshape(narrow(t, 1, head, 1), {t.size(2), t.size(3)});
}

void print_step(const char* title, const char* axes, const Shape& shape) {
  std::printf("\n%s  %s = %s\n", title, axes, to_string(shape).c_str());
}

// Seed 000: X [3, 4], H = 2, D = 2, every projection the identity.
int explain_example() {
  const Tensor x = tensor({{{1, 0, 1, 0}, {0, 1, 0, 1}, {1, 1, 0, 0}}});  // [B=1, T=3, C=4]
  Generator gen(0);
  nn::MultiHeadAttention attn({.d_model = 4, .num_heads = 2, .bias = false}, gen);
  const Tensor identity = tensor({{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}, {0, 0, 0, 1}});
  for (auto& [name, p] : attn.named_parameters()) p.copy_from(identity);

  nn::AttentionTrace trace;
  NoGradGuard no_grad;
  attn.forward_with_weights(x, x, {}, &trace);

  std::printf(
      "Multi-head attention, step by step (the worked 3x4 example): B = 1, T = 3, C = 4, H = 2,\n"
      "D = 2, W_Q = W_K = W_V = W_O = I (no biases). Shapes drop the batch axis B = 1.\n");
  print_step("1. Input X", "[T, C]", {3, 4});
  print_matrix(reshape(x, {3, 4}));
  print_step("2. Q = X W_Q, K = X W_K, V = X W_V (all equal X here)", "[T, C]", {3, 4});
  print_matrix(reshape(trace.q, {3, 4}));
  std::printf("\n3. Split into heads: reshape [T, H, D], transpose to [H, T, D]\n");
  for (int64_t h = 0; h < 2; ++h) {
    std::printf("  head %lld: Q = K = V  [T, D] = [3,2]\n", static_cast<long long>(h + 1));
    print_matrix(head_of(trace.q_heads, h));
  }
  const char* steps[] = {"4. Raw scores Q K^T", "5. Scaled scores Q K^T / sqrt(D)",
                         "6. Softmax along Tk (each row sums to 1)",
                         "7. Head outputs: weights @ V"};
  const Tensor* tensors[] = {&trace.scores, &trace.scaled_scores, &trace.weights,
                             &trace.head_outputs};
  const char* axes[] = {"[Tq, Tk]", "[Tq, Tk]", "[Tq, Tk]", "[Tq, D]"};
  for (int i = 0; i < 4; ++i) {
    std::printf("\n%s\n", steps[i]);
    for (int64_t h = 0; h < 2; ++h) {
      const Tensor m = head_of(*tensors[i], h);
      std::printf("  head %lld  %s = %s\n", static_cast<long long>(h + 1), axes[i],
                  to_string(m.shape()).c_str());
      print_matrix(m);
    }
  }
  std::printf("\n8. Concatenate heads: transpose to [T, H, D], reshape  [T, C] = [3,4]\n");
  print_matrix(reshape(trace.concat, {3, 4}));
  std::printf("\n9. Output Y = concat W_O (W_O = I)  [T, C] = [3,4]\n");
  print_matrix(reshape(trace.output, {3, 4}));
  std::printf(
      "\nThe tutorial sums rounded weights and prints 0.7518 for head 1, row 3; the exact value\n"
      "is %.4f.\n",
      head_of(trace.head_outputs, 0).at({2, 0}));
  return kExitOk;
}

void print_walk_row(const char* step, const char* axes, const Shape& shape) {
  std::printf("  %-34s %-14s %-16s %10lld\n", step, axes, to_string(shape).c_str(),
              static_cast<long long>(numel(shape)));
}

// Seed 004's shape walk for any sizes, read off a real forward pass of zeros.
int explain_shapes(int64_t B, int64_t T, int64_t C, int64_t H, int64_t KV) {
  Generator gen(0);
  nn::MultiHeadAttention attn({.d_model = C, .num_heads = H, .num_kv_heads = KV}, gen);
  const int64_t D = attn.head_dim();
  KV = attn.num_kv_heads();
  nn::AttentionTrace trace;
  {
    NoGradGuard no_grad;
    const Tensor x = Tensor::zeros({B, T, C});
    attn.forward_with_weights(x, x, {}, &trace);
  }
  std::printf(
      "Shape walk of multi-head self-attention: B = %lld, T = %lld, C = %lld, H = %lld, "
      "KV = %lld, D = C / H = %lld\n\n",
      static_cast<long long>(B), static_cast<long long>(T), static_cast<long long>(C),
      static_cast<long long>(H), static_cast<long long>(KV), static_cast<long long>(D));
  std::printf("  %-34s %-14s %-16s %10s\n", "step", "axes", "shape", "elements");
  print_walk_row("input X", "[B,T,C]", {B, T, C});
  print_walk_row("Q = X W_Q^T (values change)", "[B,T,H*D]", trace.q.shape());
  print_walk_row("K, V = X W_K^T, X W_V^T", "[B,T,KV*D]", trace.k.shape());
  print_walk_row("reshape Q (no values change)", "[B,T,H,D]", {B, T, H, D});
  print_walk_row("transpose(1,2) Q", "[B,H,T,D]", trace.q_heads.shape());
  print_walk_row("transpose(1,2) K, V", "[B,KV,T,D]", trace.k_heads.shape());
  print_walk_row("scores Q K^T / sqrt(D)", "[B,H,Tq,Tk]", trace.scaled_scores.shape());
  print_walk_row("softmax along Tk", "[B,H,Tq,Tk]", trace.weights.shape());
  print_walk_row("weights @ V (Tk summed away)", "[B,H,Tq,D]", trace.head_outputs.shape());
  print_walk_row("transpose(1,2)", "[B,Tq,H,D]", {B, T, H, D});
  print_walk_row("reshape (concatenate heads)", "[B,Tq,C]", trace.concat.shape());
  print_walk_row("output Y = concat W_O^T", "[B,Tq,C]", trace.output.shape());

  const int64_t kv_width = KV * D;
  std::printf(
      "\nParameters: W_Q %lldx%lld, W_K %lldx%lld, W_V %lldx%lld, W_O %lldx%lld, "
      "biases %lld\n",
      static_cast<long long>(C), static_cast<long long>(C), static_cast<long long>(kv_width),
      static_cast<long long>(C), static_cast<long long>(kv_width), static_cast<long long>(C),
      static_cast<long long>(C), static_cast<long long>(C),
      static_cast<long long>(2 * C + 2 * kv_width));
  std::printf("  total %lld", static_cast<long long>(attn.num_parameters()));
  if (KV == H) {
    std::printf(" = 4C^2 + 4C = %lld + %lld, whatever H is\n", static_cast<long long>(4 * C * C),
                static_cast<long long>(4 * C));
  } else {
    std::printf(" = 2C^2 + 2*C*KV*D + biases: %lld fewer than standard MHA's 4C^2 + 4C\n",
                static_cast<long long>(4 * C * C + 4 * C - attn.num_parameters()));
  }
  if (T == D) {
    std::printf(
        "\nNote: T = D = %lld here, so swapping those axes would not change any shape; "
        "test with unequal sizes.\n",
        static_cast<long long>(T));
  }
  return kExitOk;
}

// The command line: the options and --shapes, split into B, T, C, H[, KV].
struct ExplainArgs {
  ExplainArgs() {
    add_help_option(options);
    options.add_options()("shapes", boost::program_options::value(&shapes),
                          "B,T,C,H[,KV]: print the shape walk and parameter count");
    add_max_memory_option(options, max_memory, "the walk");
  }
  boost::program_options::options_description options{
      "gradlab explain: multi-head attention step by step\n"
      "Without options, reproduces the tutorial's worked 3x4 example with the real "
      "module.\nOptions"};
  std::string shapes;
  std::vector<int64_t> sizes;  // empty without --shapes
  double max_memory = 0;       // GiB; 0: 80% of the machine's memory
};

// The element count of dims if it is at most 2^28 (checked factor by factor, so nothing
// overflows), or -1.
int64_t bounded_numel(std::initializer_list<int64_t> dims) {
  constexpr int64_t kLimit = int64_t{1} << 28;
  int64_t count = 1;
  for (const int64_t d : dims) {
    if (d > kLimit || (count *= d) > kLimit) return -1;
  }
  return count;
}

// Parses the flags; returns -1 to go on or an exit code.
int parse_explain(const Arguments& args, ExplainArgs& a) {
  boost::program_options::variables_map vm;
  if (const int code = parse_or_usage("explain", args, a.options, vm); code >= 0) return code;
  if (a.shapes.empty()) return -1;

  std::vector<int64_t>& sizes = a.sizes;
  // getline drops an empty last item: "2,4,8,2," would read as 2,4,8,2.
  std::stringstream in(a.shapes + ",");
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) {
      return usage_error("explain",
                         "--shapes " + quote(a.shapes) + ": an empty size (a comma too many)",
                         a.options);
    }
    try {
      size_t used = 0;
      sizes.push_back(std::stoll(item, &used));
      if (used != item.size() || sizes.back() <= 0) throw std::invalid_argument(item);
    } catch (const std::exception&) {
      return usage_error("explain", "--shapes: " + quote(item) + " is not a positive integer",
                         a.options);
    }
  }
  if (sizes.size() != 4 && sizes.size() != 5) {
    return usage_error("explain", "--shapes expects B,T,C,H or B,T,C,H,KV", a.options);
  }
  // The walk is a real forward pass: refuse sizes whose input [B,T,C], scores [B,H,T,T] or
  // weights [C,C] would not fit, instead of overflowing the element count or the memory.
  const int64_t B = sizes[0], T = sizes[1], C = sizes[2], H = sizes[3];
  if (bounded_numel({B, T, C}) < 0 || bounded_numel({B, H, T, T}) < 0 ||
      bounded_numel({C, C}) < 0) {
    return usage_error("explain",
                       "--shapes " + quote(a.shapes) +
                           ": too large for the walk ([B,T,C], [B,H,T,T] and [C,C] must each "
                           "have at most 2^28 elements)",
                       a.options);
  }
  // What the walk holds at once: X, Q, K, V and their head views, the concatenation and the
  // output ([B,T,C] each, at most), the scores, scaled scores and weights with one temporary
  // ([B,H,T,T]), the four weights (measured at 8,1024,1024,8: 0.85 of this estimate).
  const auto count = [](std::initializer_list<int64_t> dims) {
    double n = 1;
    for (int64_t d : dims) n *= static_cast<double>(d);
    return n;
  };
  const double bytes =
      4 * (8 * count({B, T, C}) + 4 * count({B, H, T, T}) + 4 * count({C, C})) + 32.0 * (1 << 20);
  if (const int code = check_max_memory("explain", a.max_memory, a.options); code >= 0) {
    return code;
  }
  return refuse_above_memory_limit("explain", a.max_memory, bytes,
                                   "--shapes " + quote(a.shapes) + ": the walk", "", a.options);
}

int run_explain(ExplainArgs& a) {
  if (a.sizes.empty()) return explain_example();
  const std::vector<int64_t>& sizes = a.sizes;
  try {
    return explain_shapes(sizes[0], sizes[1], sizes[2], sizes[3], sizes.size() == 5 ? sizes[4] : 0);
  } catch (const ConfigError& e) {
    return usage_error("explain", e.what(), a.options);
  }
}

const CommandRow explain_row{"explain",
                             "multi-head attention step by step, and its shape walk",
                             {"--shapes"},
                             parse_explain,
                             run_explain};

}  // namespace

}  // namespace gradlab::cli
