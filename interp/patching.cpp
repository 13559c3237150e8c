// Activation patching through hooks: the clean run's activations cached once, then one
// corrupted forward pass per site with that site's part copied in.
#include "interp/patching.h"

#include <algorithm>
#include <sstream>

#include "autograd/error.h"
#include "autograd/format.h"
#include "autograd/graph.h"

namespace gradlab::interp {
namespace {

// "[B, Tq, H, D]" -> {"B", "Tq", "H", "D"}
std::vector<std::string> axes_of(const std::string& letters) {
  std::vector<std::string> axes;
  std::istringstream in(letters.size() > 2 ? letters.substr(1, letters.size() - 2) : "");
  for (std::string axis; std::getline(in >> std::ws, axis, ',');) axes.push_back(axis);
  return axes;
}

int64_t first_axis(const nn::HookPointInfo& point, const std::vector<std::string>& names) {
  const std::vector<std::string> axes = axes_of(point.letters);
  for (size_t i = 0; i < axes.size(); ++i) {
    for (const std::string& name : names) {
      if (axes[i] == name) return static_cast<int64_t>(i);
    }
  }
  return -1;
}

// corrupt with the elements of the site's head and position taken from clean.
template <class T>
void copy_site(const Tensor& clean, Tensor& mixed, int64_t head_axis, int64_t head,
               int64_t position_axis, int64_t position) {
  const Shape& shape = mixed.shape();
  auto stride_of = [&](int64_t axis) {
    int64_t stride = 1;
    for (int64_t a = axis + 1; a < static_cast<int64_t>(shape.size()); ++a) stride *= shape[a];
    return stride;
  };
  const int64_t head_stride = head >= 0 ? stride_of(head_axis) : 1;
  const int64_t position_stride = position >= 0 ? stride_of(position_axis) : 1;
  const T* from = clean.data<T>();
  T* to = mixed.mutable_data<T>();
  for (int64_t i = 0; i < mixed.numel(); ++i) {
    if (head >= 0 && (i / head_stride) % shape[head_axis] != head) continue;
    if (position >= 0 && (i / position_stride) % shape[position_axis] != position) continue;
    to[i] = from[i];
  }
}

// 0, 1, ..., count - 1; or -1 (all of them at once) when count is 0.
std::vector<int64_t> each_or_all(int64_t count) {
  if (count == 0) return {-1};
  std::vector<int64_t> indices(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) indices[static_cast<size_t>(i)] = i;
  return indices;
}

}  // namespace

bool positions_are_source(const nn::HookPointInfo& point) {
  const int64_t axis = position_axis(point);
  if (axis < 0) return false;
  return point.name.starts_with("encoder.") ||
         point.name.find("hook_source") != std::string::npos ||
         (axes_of(point.letters)[static_cast<size_t>(axis)] == "Tk" &&
          point.name.find(".cross_attn.") != std::string::npos);
}

nn::HookFilter points_of(const std::vector<PatchSite>& sites) {
  std::vector<std::string> names;
  for (const PatchSite& site : sites) names.push_back(site.point);
  return nn::HookFilter(
      [names](const std::string& name) {
        return std::find(names.begin(), names.end(), name) != names.end();
      },
      "the patched points");
}

int64_t head_axis(const nn::HookPointInfo& point) {
  return first_axis(point, {"H", "KV"});
}

int64_t position_axis(const nn::HookPointInfo& point) {
  return first_axis(point, {"T", "Tq", "Tk", "S"});
}

std::vector<PatchSite> patch_sites(const std::vector<nn::HookPointInfo>& points,
                                   const nn::HookFilter& filter, bool per_position) {
  const std::vector<std::string> matched = nn::matching_points(points, filter, "patch");
  std::vector<PatchSite> sites;
  for (const nn::HookPointInfo& point : points) {
    if (std::find(matched.begin(), matched.end(), point.name) == matched.end()) continue;
    const int64_t heads = head_axis(point) >= 0 ? point.shape[head_axis(point)] : 0;
    const int64_t positions =
        per_position && position_axis(point) >= 0 ? point.shape[position_axis(point)] : 0;
    for (const int64_t head : each_or_all(heads)) {
      for (const int64_t position : each_or_all(positions)) {
        sites.push_back({point.name, head, position});
      }
    }
  }
  return sites;
}

PatchedMetrics patch_each(const nn::SequenceModel& model, const nn::SequenceBatch& clean,
                          const nn::SequenceBatch& corrupt, const std::vector<PatchSite>& sites,
                          const std::function<double(const Tensor& logits)>& metric) {
  if (clean.inputs.shape != corrupt.inputs.shape || clean.source.shape != corrupt.source.shape) {
    throw ShapeError(
        "patch: the clean run reads " + to_string(clean.inputs.shape) +
        (clean.source.shape.empty() ? "" : " and " + to_string(clean.source.shape)) +
        ", the corrupted run " + to_string(corrupt.inputs.shape) +
        (corrupt.source.shape.empty() ? "" : " and " + to_string(corrupt.source.shape)) +
        ": patching needs sequences of the same lengths");
  }
  NoGradGuard no_grad;
  const std::vector<nn::HookPointInfo> points = nn::hook_points(model, corrupt);
  const nn::HookFilter patched = points_of(sites);
  const nn::ActivationCache clean_cache = run_with_cache(model, clean, patched, {.logits = false});
  const PatchSite* current = nullptr;
  const nn::HookFunction patch = [&](const Tensor& activation, const std::string& name) {
    if (!current || name != current->point) return Tensor();
    const Tensor& from = clean_cache.at(name);
    if (current->head < 0 && current->position < 0) return from;
    Tensor mixed = activation.detach().clone();
    const nn::HookPointInfo& point =
        *std::find_if(points.begin(), points.end(),
                      [&](const nn::HookPointInfo& info) { return info.name == name; });
    if (mixed.dtype() == DType::Float64) {
      copy_site<double>(from, mixed, head_axis(point), current->head, position_axis(point),
                        current->position);
    } else {
      copy_site<float>(from, mixed, head_axis(point), current->head, position_axis(point),
                       current->position);
    }
    return mixed;
  };
  // One scope for every site: each forward pass patches the current one alone.
  nn::HookScope scope(model, corrupt, {{patched, patch}});
  PatchedMetrics metrics;
  metrics.clean = metric(model.forward(clean));
  metrics.corrupt = metric(model.forward(corrupt));
  for (const PatchSite& site : sites) {
    current = &site;
    metrics.patched.push_back(metric(model.forward(corrupt)));
  }
  return metrics;
}

}  // namespace gradlab::interp
