// Writing attention weights to HDF5.
#include "train/io/attention_file.h"

#include <H5Cpp.h>

#include "autograd/error.h"
#include "train/io/atomic_file.h"

namespace gradlab::train {
namespace {

void write_ints(H5::H5Location& where, const std::string& name, const std::vector<int64_t>& v,
                bool as_attribute) {
  const hsize_t size = v.size();
  const H5::DataSpace space(1, &size);
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

// Writes the file's contents into temp; errors name path, the file the user asked for.
void write_attention_layers(const std::string& path, const std::string& temp,
                            const nn::SequenceBatch& batch, const std::vector<int64_t>& answer,
                            const nn::AttentionMaps& maps) {
  try {
    H5::Exception::dontPrint();
    H5::H5File file(temp, H5F_ACC_TRUNC);
    const std::vector<int64_t>& inputs = batch.inputs.values;
    const std::vector<int64_t>& source = batch.source.values;
    write_ints(file, "inputs", inputs, false);
    write_ints(file, "answer", answer, false);
    const bool encoder_decoder = !batch.source.shape.empty();
    if (encoder_decoder) write_ints(file, "source", source, false);
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

}  // namespace gradlab::train
