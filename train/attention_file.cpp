// Writing attention weights to HDF5.
#include "train/attention_file.h"

#include <H5Cpp.h>

#include "autograd/error.h"
#include "autograd/shape_ops.h"

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

}  // namespace

void write_attention_file(const std::string& path, const AttentionTokens& tokens,
                          const std::vector<Tensor>& weights, int64_t num_layers) {
  try {
    H5::Exception::dontPrint();
    H5::H5File file(path, H5F_ACC_TRUNC);
    write_ints(file, "inputs", tokens.inputs, false);
    write_ints(file, "answer", tokens.answer, false);
    const bool seq2seq = !tokens.source.empty();
    if (seq2seq) write_ints(file, "source", tokens.source, false);
    for (size_t i = 0; i < weights.size(); ++i) {
      const bool encoder = seq2seq && static_cast<int64_t>(i) < num_layers;
      const std::string name = !seq2seq  ? "layer_" + std::to_string(i)
                               : encoder ? "encoder_layer_" + std::to_string(i)
                                         : "decoder_layer_" + std::to_string(i - num_layers);
      const Tensor w = weights[i].to(DType::Float32);  // [1, H, Tq, Tk]
      const hsize_t dims[3] = {static_cast<hsize_t>(w.size(1)), static_cast<hsize_t>(w.size(2)),
                               static_cast<hsize_t>(w.size(3))};
      H5::DataSet set =
          file.createDataSet(name, H5::PredType::NATIVE_FLOAT, H5::DataSpace(3, dims));
      set.write(w.data<float>(), H5::PredType::NATIVE_FLOAT);
      const std::vector<int64_t>& keys = encoder ? tokens.source : tokens.inputs;
      write_ints(set, "query_tokens", keys, true);
      write_ints(set, "key_tokens", keys, true);
    }
  } catch (const H5::Exception& e) {
    throw CheckpointError(path + ": cannot write attention weights: " + e.getDetailMsg());
  }
}

}  // namespace gradlab::train
