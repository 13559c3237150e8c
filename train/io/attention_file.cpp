// Writing attention weights, activations and the logit lens to HDF5.
#include "train/io/attention_file.h"

#include <H5Cpp.h>

#include <algorithm>

#include "autograd/error.h"
#include "train/io/atomic_file.h"

namespace gradlab::train {
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

void write_floats(H5::H5File& file, const std::string& name, const std::vector<double>& values,
                  const std::vector<hsize_t>& dims) {
  const std::vector<float> narrow(values.begin(), values.end());
  file.createDataSet(name, H5::PredType::NATIVE_FLOAT,
                     H5::DataSpace(static_cast<int>(dims.size()), dims.data()))
      .write(narrow.data(), H5::PredType::NATIVE_FLOAT);
}

void write_lens(const std::string& path, const std::string& temp, const nn::SequenceBatch& batch,
                const std::vector<int64_t>& answer, const nn::LensProbabilities& lens) {
  try {
    H5::Exception::dontPrint();
    H5::H5File file(temp, H5F_ACC_TRUNC);
    write_tokens(file, batch, answer);
    write_ints(file, "targets", batch.targets.values, false);
    std::vector<const char*> layers;
    for (const std::string& layer : lens.layers) layers.push_back(layer.c_str());
    const hsize_t count = layers.size();
    const H5::StrType string_type(H5::PredType::C_S1, H5T_VARIABLE);
    file.createDataSet("layers", string_type, H5::DataSpace(1, &count))
        .write(layers.data(), string_type);
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
      if (batched) letters = "[" + letters.substr(4);
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

}  // namespace

void write_attention_file(const std::string& path, const nn::SequenceBatch& batch,
                          const std::vector<int64_t>& answer, const nn::AttentionMaps& maps) {
  replace_file(path, [&](const std::string& temp) {
    write_attention_layers(path, temp, batch, answer, maps);
  });
}

void write_activation_file(const std::string& path, const nn::SequenceBatch& batch,
                           const std::vector<int64_t>& answer, const nn::ActivationCache& cache,
                           const std::vector<nn::HookPointInfo>& points) {
  replace_file(path, [&](const std::string& temp) {
    write_activations(path, temp, batch, answer, cache, points);
  });
}

void write_lens_file(const std::string& path, const nn::SequenceBatch& batch,
                     const std::vector<int64_t>& answer, const nn::LensProbabilities& lens) {
  replace_file(path, [&](const std::string& temp) { write_lens(path, temp, batch, answer, lens); });
}

}  // namespace gradlab::train
