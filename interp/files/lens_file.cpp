// Writing the logit lens of one sequence, or its mean over a data set, to HDF5.
#include "interp/files/lens_file.h"

#include "interp/files/hdf5/datasets.h"

namespace gradlab::interp {

void write_lens_file(const std::string& path, const nn::SequenceBatch& batch,
                     const std::vector<int64_t>& answer, const LensProbabilities& lens) {
  hdf5::write_file(path, "the logit lens", [&](H5::H5File& file) {
    hdf5::write_tokens(file, batch, answer);
    hdf5::write_ints(file, "targets", batch.targets.values, false);
    hdf5::write_strings(file, "layers", lens.layers);
    const hsize_t count = lens.layers.size();
    const auto positions = static_cast<hsize_t>(lens.positions);
    const auto top = static_cast<hsize_t>(lens.top_k);
    hdf5::write_floats(file, "answer_probability", lens.target_probability, {count, positions});
    hdf5::write_ints(file, "top_tokens", lens.top_tokens, false, {count, positions, top});
    hdf5::write_floats(file, "top_probabilities", lens.top_probabilities, {count, positions, top});
  });
}

void write_lens_set_file(const std::string& path, const LensMean& mean, const std::string& at) {
  hdf5::write_file(path, "the logit lens", [&](H5::H5File& file) {
    hdf5::write_strings(file, "layers", mean.layers);
    hdf5::write_floats(file, "answer_probability", mean.target_probability,
                       {mean.layers.size(), static_cast<hsize_t>(mean.positions)});
    hdf5::write_scalar(file, "examples", H5::PredType::NATIVE_INT64, &mean.rows);
    const H5::StrType type(H5::PredType::C_S1, at.size());
    file.createAttribute("at", type, H5::DataSpace()).write(type, at);
  });
}

}  // namespace gradlab::interp
