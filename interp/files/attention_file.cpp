// Writing the attention weights of every layer and head to HDF5.
#include "interp/files/attention_file.h"

#include "interp/files/hdf5/datasets.h"

namespace gradlab::interp {
namespace {

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
    hdf5::write_ints(set, "query_tokens", query_tokens, true);
    hdf5::write_ints(set, "key_tokens", key_tokens, true);
  }
}

}  // namespace

void write_attention_file(const std::string& path, const nn::SequenceBatch& batch,
                          const std::vector<int64_t>& answer, const nn::AttentionMaps& maps) {
  hdf5::write_file(path, "attention weights", [&](H5::H5File& file) {
    const std::vector<int64_t>& inputs = batch.inputs.values;
    const std::vector<int64_t>& source = batch.source.values;
    hdf5::write_tokens(file, batch, answer);
    const bool encoder_decoder = !batch.source.shape.empty();
    write_layers(file, "encoder_layer_", maps.encoder_self, source, source);
    write_layers(file, encoder_decoder ? "decoder_layer_" : "layer_", maps.decoder_self, inputs,
                 inputs);
    write_layers(file, "decoder_cross_layer_", maps.decoder_cross, inputs, source);
  });
}

}  // namespace gradlab::interp
