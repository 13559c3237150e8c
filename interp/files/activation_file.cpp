// Writing a cache of hook point activations (and their gradients) to HDF5, of one prompt or
// streamed over a data set.
#include "interp/files/activation_file.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "interp/files/hdf5/datasets.h"

namespace gradlab::interp {
namespace {

void write_letters(H5::DataSet& set, const std::string& letters) {
  const H5::StrType type(H5::PredType::C_S1, std::max<size_t>(1, letters.size()));
  set.createAttribute("letters", type, H5::DataSpace()).write(type, letters);
}

// One point's dataset: value [1, ...] (or [T, C] for a point of every sequence) without its
// batch axis, labelled with its letters.
void write_point(H5::H5File& file, const std::string& name, const Tensor& activation,
                 std::string letters) {
  const Tensor value = activation.to(DType::Float32);
  // Points of every sequence ([B, T, C]) lose their batch axis of 1; positions ([T, C]) have
  // none.
  const bool batched = letters.rfind("[B, ", 0) == 0;
  if (batched) letters.erase(1, 3);  // "[B, T, C]" -> "[T, C]"
  std::vector<hsize_t> dims;
  for (int64_t axis = batched ? 1 : 0; axis < value.rank(); ++axis) {
    dims.push_back(static_cast<hsize_t>(value.size(axis)));
  }
  H5::DataSet set = file.createDataSet(name, H5::PredType::NATIVE_FLOAT,
                                       H5::DataSpace(static_cast<int>(dims.size()), dims.data()));
  set.write(value.data<float>(), H5::PredType::NATIVE_FLOAT);
  write_letters(set, letters);
}

// "[B, T, C]" -> {"B", "T", "C"}.
std::vector<std::string> axes_of(const std::string& letters) {
  std::vector<std::string> axes;
  std::istringstream in(letters.size() > 2 ? letters.substr(1, letters.size() - 2) : "");
  for (std::string axis; std::getline(in, axis, ',');) {
    axes.push_back(axis.substr(axis.find_first_not_of(' ')));
  }
  return axes;
}

// One point of a data set's file: an example's values [E] gathered from a batch's cache, and
// where they go.
struct SetPoint {
  bool batched = false;        // the point has the batch axis
  std::vector<int64_t> shape;  // an example's, without the batch axis
  int64_t position_axis = -1;  // of shape: dropped at the answer
  std::vector<hsize_t> dims;   // an example's in the file
  std::string letters;         // of dims, without the example axis
  H5::DataSet set;             // keep_examples: [N, dims...]
  std::vector<double> sums;    // else: [E]
  int64_t elements() const {
    int64_t e = 1;
    for (const hsize_t d : dims) e *= static_cast<int64_t>(d);
    return e;
  }
};

SetPoint set_point(const Tensor& value, const std::string& letters, bool at_answer) {
  SetPoint point;
  std::vector<std::string> axes = axes_of(letters);
  point.batched = !axes.empty() && axes.front() == "B";
  if (point.batched) axes.erase(axes.begin());
  for (int64_t axis = point.batched ? 1 : 0; axis < value.rank(); ++axis) {
    point.shape.push_back(value.size(axis));
  }
  std::string kept;
  for (size_t axis = 0; axis < point.shape.size(); ++axis) {
    const std::string name = axis < axes.size() ? axes[axis] : "?";
    if (at_answer && point.position_axis < 0 && (name == "T" || name == "Tq")) {
      point.position_axis = static_cast<int64_t>(axis);
      continue;
    }
    point.dims.push_back(static_cast<hsize_t>(point.shape[axis]));
    kept += (kept.empty() ? "" : ", ") + name;
  }
  point.letters = kept;
  return point;
}

// Row r's values of a [R, ...] (or unbatched) float32 cache entry, at its answer position when
// the point drops its position axis, appended to out.
void gather(const SetPoint& point, const float* data, int64_t r, int64_t position,
            std::vector<float>& out) {
  int64_t full = 1;
  for (const int64_t d : point.shape) full *= d;
  const float* example = point.batched ? data + r * full : data;
  if (point.position_axis < 0) {
    out.insert(out.end(), example, example + full);
    return;
  }
  const auto p = static_cast<size_t>(point.position_axis);
  int64_t outer = 1, inner = 1;
  for (size_t axis = 0; axis < p; ++axis) outer *= point.shape[axis];
  for (size_t axis = p + 1; axis < point.shape.size(); ++axis) inner *= point.shape[axis];
  for (int64_t o = 0; o < outer; ++o) {
    const float* at = example + (o * point.shape[p] + position) * inner;
    out.insert(out.end(), at, at + inner);
  }
}

// Writes values [R, dims...] into rows [first, first + R) of set.
template <class T>
void write_rows(H5::DataSet& set, const H5::PredType& type, const std::vector<T>& values,
                int64_t first, int64_t R) {
  H5::DataSpace space = set.getSpace();
  std::vector<hsize_t> count(static_cast<size_t>(space.getSimpleExtentNdims()));
  space.getSimpleExtentDims(count.data());
  std::vector<hsize_t> start(count.size(), 0);
  start[0] = static_cast<hsize_t>(first);
  count[0] = static_cast<hsize_t>(R);
  space.selectHyperslab(H5S_SELECT_SET, count.data(), start.data());
  const H5::DataSpace memory(static_cast<int>(count.size()), count.data());
  set.write(values.data(), type, memory, space);
}

// The token rows of a batch into /name [N, T], created on the first batch.
void write_token_rows(H5::H5File& file, const std::string& name, const Indices& tokens,
                      int64_t examples, int64_t first) {
  if (tokens.shape.empty()) return;
  if (first == 0) {
    const hsize_t dims[2] = {static_cast<hsize_t>(examples),
                             static_cast<hsize_t>(tokens.shape.at(1))};
    file.createDataSet(name, H5::PredType::NATIVE_INT64, H5::DataSpace(2, dims));
  }
  H5::DataSet set = file.openDataSet(name);
  write_rows(set, H5::PredType::NATIVE_INT64, tokens.values, first, tokens.shape.at(0));
}

}  // namespace

void write_activation_set_file(const std::string& path,
                               const std::vector<nn::HookPointInfo>& points,
                               const ActivationSetLayout& layout,
                               const std::function<void(const ActivationBatchSink&)>& produce) {
  hdf5::write_file(path, "activations", [&](H5::H5File& file) {
    std::map<std::string, SetPoint> written;
    std::vector<std::string> order;
    int64_t rows = 0;
    produce([&](const nn::SequenceBatch& batch, const nn::ActivationCache& cache,
                const std::vector<int64_t>& positions) {
      const int64_t R = batch.inputs.shape.at(0);
      write_token_rows(file, "inputs", batch.inputs, layout.examples, rows);
      write_token_rows(file, "targets", batch.targets, layout.examples, rows);
      write_token_rows(file, "source", batch.source, layout.examples, rows);
      for (const std::string& name : cache.names()) {
        const Tensor value = cache.at(name).to(DType::Float32);
        auto found = written.find(name);
        if (found == written.end()) {
          const std::string base = name.ends_with("_grad") ? name.substr(0, name.size() - 5) : name;
          std::string letters;
          for (const nn::HookPointInfo& info : points) {
            if (info.name == base) letters = info.letters;
          }
          SetPoint point = set_point(value, letters, layout.at_answer);
          if (layout.keep_examples) {
            std::vector<hsize_t> dims{static_cast<hsize_t>(layout.examples)};
            dims.insert(dims.end(), point.dims.begin(), point.dims.end());
            point.set =
                file.createDataSet(name, H5::PredType::NATIVE_FLOAT,
                                   H5::DataSpace(static_cast<int>(dims.size()), dims.data()));
            write_letters(point.set, "[N" + std::string(point.letters.empty() ? "" : ", ") +
                                         point.letters + "]");
          } else {
            point.sums.assign(static_cast<size_t>(point.elements()), 0.0);
          }
          found = written.emplace(name, std::move(point)).first;
          order.push_back(name);
        }
        SetPoint& point = found->second;
        std::vector<float> values;
        values.reserve(static_cast<size_t>(R * point.elements()));
        for (int64_t r = 0; r < R; ++r) {
          gather(point, value.data<float>(), r, positions[static_cast<size_t>(r)], values);
        }
        if (layout.keep_examples) {
          write_rows(point.set, H5::PredType::NATIVE_FLOAT, values, rows, R);
          continue;
        }
        for (size_t i = 0; i < values.size(); ++i) point.sums[i % point.sums.size()] += values[i];
      }
      rows += R;
    });
    if (!layout.keep_examples) {
      for (const std::string& name : order) {
        const SetPoint& point = written.at(name);
        std::vector<float> mean;
        for (const double sum : point.sums) {
          mean.push_back(static_cast<float>(sum / static_cast<double>(rows)));
        }
        H5::DataSet set = file.createDataSet(
            name, H5::PredType::NATIVE_FLOAT,
            H5::DataSpace(static_cast<int>(point.dims.size()), point.dims.data()));
        set.write(mean.data(), H5::PredType::NATIVE_FLOAT);
        write_letters(set, "[" + point.letters + "]");
      }
    }
    hdf5::write_scalar(file, "examples", H5::PredType::NATIVE_INT64, &rows);
    const std::string reduce = layout.keep_examples ? "none" : "mean";
    const std::string at = layout.at_answer ? "answer" : "all";
    for (const auto& [attribute, text] : {std::pair{"reduce", reduce}, std::pair{"at", at}}) {
      const H5::StrType type(H5::PredType::C_S1, text.size());
      file.createAttribute(attribute, type, H5::DataSpace()).write(type, text);
    }
  });
}

void write_activation_file(const std::string& path, const nn::SequenceBatch& batch,
                           const std::vector<int64_t>& answer, const nn::ActivationCache& cache,
                           const std::vector<nn::HookPointInfo>& points) {
  hdf5::write_file(path, "activations", [&](H5::H5File& file) {
    hdf5::write_tokens(file, batch, answer);
    for (const std::string& name : cache.names()) {
      const std::string point = name.ends_with("_grad") ? name.substr(0, name.size() - 5) : name;
      std::string letters;
      for (const nn::HookPointInfo& info : points) {
        if (info.name == point) letters = info.letters;
      }
      write_point(file, name, cache.at(name), letters);
    }
  });
}

}  // namespace gradlab::interp
