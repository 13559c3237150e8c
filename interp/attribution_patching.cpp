// Attribution patching through hooks: the clean run's activations cached, the corrupted run's
// activations and the metric's gradients read by forward and backward hooks of one pass, and
// their products summed once per point into its (head, position) cells.
#include "interp/attribution_patching.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"

namespace gradlab::interp {
namespace {

// sum (clean - corrupt) * gradient over each cell of a point: [heads][positions], one head or
// one position for a point without that axis.
struct CellSums {
  int64_t heads = 1, positions = 1;
  std::vector<double> sums;

  double site(const PatchSite& s) const {
    double total = 0;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t p = 0; p < positions; ++p) {
        if ((s.head < 0 || s.head == h) && (s.position < 0 || s.position == p)) {
          total += sums[static_cast<size_t>(h * positions + p)];
        }
      }
    }
    return total;
  }
};

CellSums cell_sums(const Tensor& clean, const Tensor& corrupt, const Tensor& gradient,
                   const nn::HookPointInfo& point) {
  const Shape& shape = corrupt.shape();
  const int64_t head = head_axis(point), position = position_axis(point);
  auto stride_of = [&](int64_t axis) {
    int64_t stride = 1;
    for (int64_t a = axis + 1; a < static_cast<int64_t>(shape.size()); ++a) stride *= shape[a];
    return stride;
  };
  CellSums cells;
  if (head >= 0) cells.heads = shape[head];
  if (position >= 0) cells.positions = shape[position];
  cells.sums.assign(static_cast<size_t>(cells.heads * cells.positions), 0.0);
  if (!gradient.defined()) return cells;  // the backward pass never reached the point
  const Tensor a = clean.to(DType::Float64), b = corrupt.to(DType::Float64),
               g = gradient.to(DType::Float64);
  const double *from = a.data<double>(), *to = b.data<double>(), *grad = g.data<double>();
  const int64_t head_stride = head >= 0 ? stride_of(head) : 1;
  const int64_t position_stride = position >= 0 ? stride_of(position) : 1;
  for (int64_t i = 0; i < corrupt.numel(); ++i) {
    const int64_t h = head >= 0 ? (i / head_stride) % cells.heads : 0;
    const int64_t p = position >= 0 ? (i / position_stride) % cells.positions : 0;
    cells.sums[static_cast<size_t>(h * cells.positions + p)] += (from[i] - to[i]) * grad[i];
  }
  return cells;
}

}  // namespace

AttributedMetrics attribute_each(const nn::SequenceModel& model, const nn::SequenceBatch& clean,
                                 const nn::SequenceBatch& corrupt,
                                 const std::vector<PatchSite>& sites,
                                 const DifferentiableMetric& metric) {
  if (clean.inputs.shape != corrupt.inputs.shape || clean.source.shape != corrupt.source.shape) {
    throw ShapeError("attribution patching: the clean run reads " + to_string(clean.inputs.shape) +
                     ", the corrupted run " + to_string(corrupt.inputs.shape) +
                     " (or their sources differ): it needs sequences of the same lengths");
  }
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, corrupt);
  const nn::HookFilter patched = points_of(sites);
  std::map<std::string, Tensor> corrupt_values, gradients;
  const nn::HookFunction read_value = [&](const Tensor& value, const std::string& name) {
    corrupt_values[name] = value.detach().clone();
    return Tensor();
  };
  const nn::HookFunction read_gradient = [&](const Tensor& gradient, const std::string& name) {
    gradients[name] = gradient;
    return Tensor();
  };
  AttributedMetrics metrics;
  {
    // The parameters' gradients go here, to be dropped: the caller's stay as they were.
    LeafGradients dropped;
    LeafGradientScope leaves(dropped);
    const Tensor logits = nn::run_with_hooks(
        model, corrupt,
        {{patched, read_value}, {patched, read_gradient, nn::HookDirection::Backward}});
    const Tensor value = metric(logits);
    metrics.corrupt = value.item();
    value.backward();
  }
  NoGradGuard no_grad;
  const nn::ActivationCache clean_cache = run_with_cache(model, clean, patched);
  metrics.clean = metric(clean_cache.logits).item();
  std::map<std::string, CellSums> cells;
  for (const nn::HookPointInfo& point : points) {
    if (!patched.matches(point.name)) continue;
    const auto gradient = gradients.find(point.name);
    cells[point.name] = cell_sums(clean_cache.at(point.name), corrupt_values.at(point.name),
                                  gradient == gradients.end() ? Tensor() : gradient->second, point);
  }
  for (const PatchSite& site : sites) {
    metrics.estimated.push_back(metrics.corrupt + cells.at(site.point).site(site));
  }
  return metrics;
}

std::vector<size_t> top_indices(const std::vector<double>& values, double baseline, size_t k) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t i, size_t j) {
    return std::abs(values[i] - baseline) > std::abs(values[j] - baseline);
  });
  order.resize(std::min(k, order.size()));
  return order;
}

double correlation(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 2) return std::numeric_limits<double>::quiet_NaN();
  const double count = static_cast<double>(n);
  const double mean_a = std::accumulate(a.begin(), a.begin() + n, 0.0) / count;
  const double mean_b = std::accumulate(b.begin(), b.begin() + n, 0.0) / count;
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; ++i) {
    ab += (a[i] - mean_a) * (b[i] - mean_b);
    aa += (a[i] - mean_a) * (a[i] - mean_a);
    bb += (b[i] - mean_b) * (b[i] - mean_b);
  }
  if (aa == 0 || bb == 0) return std::numeric_limits<double>::quiet_NaN();
  return ab / std::sqrt(aa * bb);
}

}  // namespace gradlab::interp
