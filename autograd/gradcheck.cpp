// Central-difference gradient checking.
#include "autograd/gradcheck.h"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <utility>

#include "autograd/elementwise.h"
#include "autograd/graph.h"
#include "autograd/reduce.h"

namespace gradlab {

bool GradcheckReport::passed() const {
  return std::all_of(inputs.begin(), inputs.end(), [](const InputReport& r) { return r.passed; });
}

double GradcheckReport::max_abs_error() const {
  double m = 0;
  for (const InputReport& r : inputs) m = std::max(m, r.max_abs_error);
  return m;
}

double GradcheckReport::max_rel_error() const {
  double m = 0;
  for (const InputReport& r : inputs) m = std::max(m, r.max_rel_error);
  return m;
}

namespace {

// The flat indices gradcheck_tensors perturbs, in increasing order.
std::vector<int64_t> elements_to_check(int64_t numel, const GradcheckOptions& options,
                                       Generator& gen) {
  std::vector<int64_t> elements;
  const int64_t wanted = options.elements_per_tensor;
  if (wanted <= 0 || numel <= wanted) {
    for (int64_t i = 0; i < numel; ++i) elements.push_back(i);
    return elements;
  }
  std::vector<uint8_t> chosen(numel, 0);
  chosen[0] = chosen[numel - 1] = 1;
  for (int64_t count = 2; count < wanted;) {
    const auto i = static_cast<int64_t>(gen.below(static_cast<uint64_t>(numel)));
    if (!chosen[i]) {
      chosen[i] = 1;
      ++count;
    }
  }
  for (int64_t i = 0; i < numel; ++i) {
    if (chosen[i]) elements.push_back(i);
  }
  return elements;
}

}  // namespace

GradcheckReport gradcheck_tensors(const std::function<Tensor()>& fn, const std::vector<Tensor>& wrt,
                                  const GradcheckOptions& options) {
  for (Tensor t : wrt) {
    check_same_dtype("gradcheck", t.dtype(), DType::Float64);
    t.zero_grad();
  }
  const Tensor out = fn();
  GradcheckReport report;
  report.ops = ops_in_graph(out);
  Generator gen(options.seed);
  const Tensor weights = Tensor::randn(out.shape(), gen, DType::Float64);
  auto objective = [&](const Tensor& y) { return sum(y * weights); };
  objective(out).backward();

  NoGradGuard no_grad;
  for (Tensor input : wrt) {
    InputReport r;
    r.shape = input.shape();
    const Tensor analytic =
        input.grad().defined() ? input.grad() : Tensor::zeros(input.shape(), DType::Float64);
    // A fresh writable pointer for every write: each changes input's version, so that values a
    // module keeps from it (nn::StackedLinear's stacked weight) are derived again.
    auto set = [&input](int64_t i, double value) { input.mutable_data<double>()[i] = value; };
    double worst = -1;
    for (const int64_t i : elements_to_check(input.numel(), options, gen)) {
      const double saved = input.data<double>()[i];
      set(i, saved + options.eps);
      const double plus = objective(fn()).item();
      set(i, saved - options.eps);
      const double minus = objective(fn()).item();
      set(i, saved);
      const double numeric = (plus - minus) / (2 * options.eps);
      const double a = analytic.data<double>()[i];
      const double abs_error = std::abs(a - numeric);
      const double scale = std::max(std::abs(numeric), std::abs(a));
      if (!(abs_error <= options.atol + options.rtol * std::abs(numeric))) r.passed = false;
      if (abs_error > worst || std::isnan(abs_error)) {
        worst = std::isnan(abs_error) ? INFINITY : abs_error;
        r.worst_index = i;
      }
      r.max_abs_error = std::max(r.max_abs_error, abs_error);
      if (scale > options.atol) r.max_rel_error = std::max(r.max_rel_error, abs_error / scale);
    }
    input.zero_grad();
    report.inputs.push_back(r);
  }
  return report;
}

GradcheckReport gradcheck(const GradcheckFn& fn, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& options) {
  std::vector<Tensor> x;
  for (const Tensor& input : inputs) x.push_back(input.to(DType::Float64).set_requires_grad());
  return gradcheck_tensors([&] { return fn(x); }, x, options);
}

std::string describe(const GradcheckReport& report) {
  std::ostringstream out;
  out << "max abs " << report.max_abs_error() << ", max rel " << report.max_rel_error();
  for (size_t i = 0; i < report.inputs.size(); ++i) {
    const InputReport& r = report.inputs[i];
    if (!r.passed) {
      out << "; input " << i << " " << to_string(r.shape) << " fails, worst element "
          << r.worst_index << " (abs " << r.max_abs_error << ")";
    }
  }
  return out.str();
}

}  // namespace gradlab
