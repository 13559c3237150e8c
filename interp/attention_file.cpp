// Writing attention weights, activations, head scores, patching results and the logit lens to
// HDF5.
#include "interp/attention_file.h"

#include <H5Cpp.h>

#include <algorithm>
#include <limits>

#include "autograd/error.h"
#include "io/atomic_file.h"

namespace gradlab::interp {
namespace {

// dims: the dataset's shape; by default a vector of v's length.
void write_ints(H5::H5Location& where, const std::string& name, const std::vector<int64_t>& v,
                bool as_attribute, std::vector<hsize_t> dims = {}) {
  if (dims.empty()) dims.push_back(v.size());
  const H5::DataSpace space(static_cast<int>(dims.size()), dims.data());
  if (as_attribute) {
    static_cast<H5::H5Object&>(where)
        .createAttribute(name, H5::PredType::NATIVE_INT64, space)
        .write(H5::PredType::NATIVE_INT64, v.data());
  } else {
    where.createDataSet(name, H5::PredType::NATIVE_INT64, space)
        .write(v.data(), H5::PredType::NATIVE_INT64);
  }
}

// One dataset per layer: prefix<i> [H, Tq, Tk] from weights[i] [1, H, Tq, Tk].
void write_layers(H5::H5File& file, const std::string& prefix, const std::vector<Tensor>& weights,
                  const std::vector<int64_t>& query_tokens,
                  const std::vector<int64_t>& key_tokens) {
  for (size_t i = 0; i < weights.size(); ++i) {
    const Tensor w = weights[i].to(DType::Float32);
    const hsize_t dims[3] = {static_cast<hsize_t>(w.size(1)), static_cast<hsize_t>(w.size(2)),
                             static_cast<hsize_t>(w.size(3))};
    H5::DataSet set = file.createDataSet(prefix + std::to_string(i), H5::PredType::NATIVE_FLOAT,
                                         H5::DataSpace(3, dims));
    set.write(w.data<float>(), H5::PredType::NATIVE_FLOAT);
    write_ints(set, "query_tokens", query_tokens, true);
    write_ints(set, "key_tokens", key_tokens, true);
  }
}

// The tokens the model read: /inputs, /answer and, for the encoder-decoder, /source.
void write_tokens(H5::H5File& file, const nn::SequenceBatch& batch,
                  const std::vector<int64_t>& answer) {
  write_ints(file, "inputs", batch.inputs.values, false);
  write_ints(file, "answer", answer, false);
  if (!batch.source.shape.empty()) write_ints(file, "source", batch.source.values, false);
}

// A 1-D dataset of fixed-length strings, null-padded to the longest, so that h5py reads them
// without a global heap: f[name].asstr()[:].
void write_strings(H5::H5File& file, const std::string& name,
                   const std::vector<std::string>& values) {
  size_t width = 1;
  for (const std::string& value : values) width = std::max(width, value.size());
  std::vector<char> packed(values.size() * width, '\0');
  for (size_t i = 0; i < values.size(); ++i) values[i].copy(packed.data() + i * width, width);
  const hsize_t size = values.size();
  const H5::StrType type(H5::PredType::C_S1, width);
  type.setStrpad(H5T_STR_NULLPAD);
  file.createDataSet(name, type, H5::DataSpace(1, &size)).write(packed.data(), type);
}

void write_floats(H5::H5File& file, const std::string& name, const std::vector<double>& values,
                  const std::vector<hsize_t>& dims) {
  const std::vector<float> narrow(values.begin(), values.end());
  file.createDataSet(name, H5::PredType::NATIVE_FLOAT,
                     H5::DataSpace(static_cast<int>(dims.size()), dims.data()))
      .write(narrow.data(), H5::PredType::NATIVE_FLOAT);
}

void write_lens(const std::string& path, const std::string& temp, const nn::SequenceBatch& batch,
                const std::vector<int64_t>& answer, const LensProbabilities& lens) {
  try {
    H5::Exception::dontPrint();
    H5::H5File file(temp, H5F_ACC_TRUNC);
    write_tokens(file, batch, answer);
    write_ints(file, "targets", batch.targets.values, false);
    write_strings(file, "layers", lens.layers);
    const hsize_t count = lens.layers.size();
    const auto positions = static_cast<hsize_t>(lens.positions);
    const auto top = static_cast<hsize_t>(lens.top_k);
    write_floats(file, "answer_probability", lens.target_probability, {count, positions});
    write_ints(file, "top_tokens", lens.top_tokens, false, {count, positions, top});
    write_floats(file, "top_probabilities", lens.top_probabilities, {count, positions, top});
  } catch (const H5::Exception& e) {
    throw FileError(path + ": cannot write the logit lens: " + e.getDetailMsg());
  }
}

void write_activations(const std::string& path, const std::string& temp,
                       const nn::SequenceBatch& batch, const std::vector<int64_t>& answer,
                       const nn::ActivationCache& cache,
                       const std::vector<nn::HookPointInfo>& points) {
  try {
    H5::Exception::dontPrint();
    H5::H5File file(temp, H5F_ACC_TRUNC);
    write_tokens(file, batch, answer);
    for (const std::string& name : cache.names()) {
      const Tensor value = cache.at(name).to(DType::Float32);
      const std::string point = name.ends_with("_grad") ? name.substr(0, name.size() - 5) : name;
      std::string letters;
      for (const nn::HookPointInfo& info : points) {
        if (info.name == point) letters = info.letters;
      }
      // Points of every sequence ([B, T, C]) lose their batch axis of 1; positions ([T, C]) have
      // none.
      const bool batched = letters.rfind("[B, ", 0) == 0;
      if (batched) letters.erase(1, 3);  // "[B, T, C]" -> "[T, C]"
      std::vector<hsize_t> dims;
      for (int64_t axis = batched ? 1 : 0; axis < value.rank(); ++axis) {
        dims.push_back(static_cast<hsize_t>(value.size(axis)));
      }
      H5::DataSet set =
          file.createDataSet(name, H5::PredType::NATIVE_FLOAT,
                             H5::DataSpace(static_cast<int>(dims.size()), dims.data()));
      set.write(value.data<float>(), H5::PredType::NATIVE_FLOAT);
      const H5::StrType type(H5::PredType::C_S1, std::max<size_t>(1, letters.size()));
      set.createAttribute("letters", type, H5::DataSpace()).write(type, letters);
    }
  } catch (const H5::Exception& e) {
    throw FileError(path + ": cannot write activations: " + e.getDetailMsg());
  }
}

// One score kind of every point: [L, H].
void write_score_table(H5::H5File& file, const std::string& name,
                       const std::vector<LayerHeadScores>& scores,
                       std::vector<double> LayerHeadScores::*kind) {
  std::vector<double> values;
  for (const LayerHeadScores& point : scores) {
    values.insert(values.end(), (point.*kind).begin(), (point.*kind).end());
  }
  const hsize_t dims[2] = {scores.size(), scores.empty() ? 0 : (scores[0].*kind).size()};
  file.createDataSet(name, H5::PredType::NATIVE_DOUBLE, H5::DataSpace(2, dims))
      .write(values.data(), H5::PredType::NATIVE_DOUBLE);
}

void write_scalar(H5::H5File& file, const std::string& name, const H5::PredType& type,
                  const void* value) {
  file.createAttribute(name, type, H5::DataSpace()).write(type, value);
}

void write_head_scores(const std::string& path, const std::string& temp,
                       const std::vector<LayerHeadScores>& scores,
                       const HeadScoreOptions& options) {
  try {
    H5::Exception::dontPrint();
    H5::H5File file(temp, H5F_ACC_TRUNC);
    write_score_table(file, "previous_token", scores, &LayerHeadScores::previous_token);
    write_score_table(file, "duplicate_token", scores, &LayerHeadScores::duplicate_token);
    write_score_table(file, "induction", scores, &LayerHeadScores::induction);
    std::vector<std::string> points;
    for (const LayerHeadScores& point : scores) points.push_back(point.point);
    write_strings(file, "points", points);
    write_scalar(file, "length", H5::PredType::NATIVE_INT64, &options.length);
    write_scalar(file, "sequences", H5::PredType::NATIVE_INT64, &options.sequences);
    write_scalar(file, "seed", H5::PredType::NATIVE_UINT64, &options.seed);
  } catch (const H5::Exception& e) {
    throw FileError(path + ": cannot write head scores: " + e.getDetailMsg());
  }
}

// Writes the file's contents into temp; errors name path, the file the user asked for.
void write_attention_layers(const std::string& path, const std::string& temp,
                            const nn::SequenceBatch& batch, const std::vector<int64_t>& answer,
                            const nn::AttentionMaps& maps) {
  try {
    H5::Exception::dontPrint();
    H5::H5File file(temp, H5F_ACC_TRUNC);
    const std::vector<int64_t>& inputs = batch.inputs.values;
    const std::vector<int64_t>& source = batch.source.values;
    write_tokens(file, batch, answer);
    const bool encoder_decoder = !batch.source.shape.empty();
    write_layers(file, "encoder_layer_", maps.encoder_self, source, source);
    write_layers(file, encoder_decoder ? "decoder_layer_" : "layer_", maps.decoder_self, inputs,
                 inputs);
    write_layers(file, "decoder_cross_layer_", maps.decoder_cross, inputs, source);
  } catch (const H5::Exception& e) {
    throw FileError(path + ": cannot write attention weights: " + e.getDetailMsg());
  }
}

void write_patching(const std::string& path, const std::string& temp,
                    const PatchingResults& results) {
  try {
    H5::Exception::dontPrint();
    H5::H5File file(temp, H5F_ACC_TRUNC);
    write_ints(file, "clean_inputs", results.clean.inputs.values, false);
    write_ints(file, "corrupt_inputs", results.corrupt.inputs.values, false);
    if (!results.clean.source.shape.empty()) {
      write_ints(file, "clean_source", results.clean.source.values, false);
      write_ints(file, "corrupt_source", results.corrupt.source.values, false);
    }
    write_ints(file, "clean_answer", results.clean_answer, false);
    write_ints(file, "corrupt_answer", results.corrupt_answer, false);
    write_strings(file, "rows", results.rows);
    write_strings(file, "row_axes", results.row_axes);
    size_t width = 1;
    for (const auto& row : results.scores) width = std::max(width, row.size());
    std::vector<double> scores(results.scores.size() * width,
                               std::numeric_limits<double>::quiet_NaN());
    for (size_t r = 0; r < results.scores.size(); ++r) {
      std::copy(results.scores[r].begin(), results.scores[r].end(), scores.begin() + r * width);
    }
    const hsize_t dims[2] = {results.scores.size(), width};
    file.createDataSet("scores", H5::PredType::NATIVE_DOUBLE, H5::DataSpace(2, dims))
        .write(scores.data(), H5::PredType::NATIVE_DOUBLE);
    write_scalar(file, "clean_logit_difference", H5::PredType::NATIVE_DOUBLE,
                 &results.clean_difference);
    write_scalar(file, "corrupt_logit_difference", H5::PredType::NATIVE_DOUBLE,
                 &results.corrupt_difference);
  } catch (const H5::Exception& e) {
    throw FileError(path + ": cannot write the patching results: " + e.getDetailMsg());
  }
}

}  // namespace

void write_patching_file(const std::string& path, const PatchingResults& results) {
  io::replace_file(path, [&](const std::string& temp) { write_patching(path, temp, results); });
}

void write_head_scores_file(const std::string& path, const std::vector<LayerHeadScores>& scores,
                            const HeadScoreOptions& options) {
  for (const LayerHeadScores& point : scores) {
    if (point.induction.size() != scores[0].induction.size()) {
      throw ShapeError(path + ": " + point.point + " has " +
                       std::to_string(point.induction.size()) + " heads and " + scores[0].point +
                       " " + std::to_string(scores[0].induction.size()) +
                       "; the score tables are [points, heads]");
    }
  }
  io::replace_file(
      path, [&](const std::string& temp) { write_head_scores(path, temp, scores, options); });
}

void write_attention_file(const std::string& path, const nn::SequenceBatch& batch,
                          const std::vector<int64_t>& answer, const nn::AttentionMaps& maps) {
  io::replace_file(path, [&](const std::string& temp) {
    write_attention_layers(path, temp, batch, answer, maps);
  });
}

void write_activation_file(const std::string& path, const nn::SequenceBatch& batch,
                           const std::vector<int64_t>& answer, const nn::ActivationCache& cache,
                           const std::vector<nn::HookPointInfo>& points) {
  io::replace_file(path, [&](const std::string& temp) {
    write_activations(path, temp, batch, answer, cache, points);
  });
}

void write_lens_file(const std::string& path, const nn::SequenceBatch& batch,
                     const std::vector<int64_t>& answer, const LensProbabilities& lens) {
  io::replace_file(path,
                   [&](const std::string& temp) { write_lens(path, temp, batch, answer, lens); });
}

}  // namespace gradlab::interp
