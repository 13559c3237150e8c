// libFuzzer target: the --intervene spec parser (interp::parse_intervention), which eval, predict,
// sample, lens, dla, patch and Python's model.intervene share, and what a parsed spec does to a
// small model: applied (interp::AppliedInterventions), one forward pass, then removed.
//
// Input: one spec, e.g. "blocks.0.hook_resid_pre=keep:a.h5#m". The fuzzer runs in a temporary
// directory holding an HDF5 file of arrays (a.h5: a subspace m, values v and w, a dataset in a
// group, NaN and huge values, an empty matrix), a file that is not HDF5 (bad.h5) and a directory
// (dir); inputs naming a file with a '/' in it are rejected, so no other file can be read. (Give
// libFuzzer absolute paths, as scripts/fuzz.sh does.)
//
// What counts as a bug: any crash or sanitizer report; an exception other than ConfigError (or
// the ShapeError of a pass that a stored array does not fit); a ConfigError from the parser that
// is not one line starting with "--intervene '"; a model whose parameters differ once the
// interventions are removed.
#include <H5Cpp.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "autograd/error.h"
#include "autograd/graph.h"
#include "interp/intervention.h"
#include "nn/models.h"
#include "nn/sequence_model.h"

namespace {

using namespace gradlab;

[[noreturn]] void bug(const std::string& what) {
  std::fprintf(stderr, "fuzz_intervene: %s\n", what.c_str());
  std::abort();
}

std::string& workdir() {
  static std::string dir;
  return dir;
}

void remove_workdir() {
  std::error_code ignored;
  std::filesystem::remove_all(workdir(), ignored);
}

void write_array(H5::H5File& file, const std::string& name, const std::vector<double>& values,
                 const std::vector<hsize_t>& dims) {
  H5::DataSet set = file.createDataSet(name, H5::PredType::IEEE_F64LE,
                                       H5::DataSpace(static_cast<int>(dims.size()), dims.data()));
  if (!values.empty()) set.write(values.data(), H5::PredType::NATIVE_DOUBLE);
}

// The files a spec may name, in a fresh working directory (removed at exit). The model is
// 8 wide with 2 heads of 4 and reads 4 positions, so that m fits the residual stream and v
// a whole pass.
void make_workdir() {
  std::string dir =
      (std::filesystem::temp_directory_path() / "gradlab-fuzz-intervene-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr || ::chdir(dir.c_str()) != 0) bug("cannot make workdir");
  workdir() = dir;
  std::atexit(remove_workdir);
  H5::H5File file("a.h5", H5F_ACC_TRUNC);
  std::vector<double> ramp(64);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = 0.25 * static_cast<double>(i % 7) - 0.5;
  write_array(file, "m", {ramp.begin(), ramp.begin() + 16}, {2, 8});
  write_array(file, "v", {ramp.begin(), ramp.begin() + 32}, {4, 8});
  write_array(file, "w", {ramp.begin(), ramp.begin() + 40}, {5, 8});  // embed's [V, C]
  write_array(file, "h", {ramp.begin(), ramp.begin() + 16}, {4, 4});  // one head's [T, D]
  file.createGroup("g");
  write_array(file, "g/inner", {ramp.begin(), ramp.begin() + 24}, {3, 8});
  std::vector<double> nan(16, std::numeric_limits<double>::quiet_NaN());
  write_array(file, "nan", nan, {2, 8});
  write_array(file, "huge", std::vector<double>(16, 1e300), {2, 8});
  write_array(file, "empty", {}, {0, 8});
  write_array(file, "scalar", {1.0}, {1});
  std::ofstream("bad.h5") << "\x89HDF\r\n\x1a\n not really";
  std::filesystem::create_directory("dir");
}

std::shared_ptr<nn::SequenceModel> small_model() {
  nn::ModelConfig config{.vocab_size = 5,
                         .max_len = 4,
                         .d_model = 8,
                         .num_layers = 2,
                         .seed = 1,
                         .attention = {.num_heads = 2},
                         .feed_forward = {.d_ff = 8}};
  std::shared_ptr<nn::SequenceModel> model = nn::make_sequence_model("decoder", config);
  model->eval();
  return model;
}

std::vector<float> parameter_values(const nn::SequenceModel& model) {
  std::vector<float> values;
  for (const auto& [name, parameter] : model.named_parameters()) {
    const std::vector<double> v = parameter.to_vector();
    values.insert(values.end(), v.begin(), v.end());
  }
  return values;
}

bool one_line(const std::string& message) {
  return !message.empty() && message.find('\n') == std::string::npos;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  make_workdir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string spec(reinterpret_cast<const char*>(data), size);
  const size_t hash = spec.rfind('#');
  if (spec.substr(0, hash == std::string::npos ? spec.size() : hash).find('/') !=
      std::string::npos) {
    return -1;
  }
  interp::Intervention parsed;
  try {
    parsed = interp::parse_intervention(spec);
  } catch (const ConfigError& e) {
    if (!one_line(e.what()) || std::string(e.what()).rfind("--intervene '", 0) != 0) {
      bug("a refusal that is not one line naming the spec: " + std::string(e.what()));
    }
    return 0;
  } catch (const std::exception& e) {
    bug("parse: unexpected exception: " + std::string(e.what()));
  }

  const NoGradGuard no_graph;
  static const std::shared_ptr<nn::SequenceModel> model = small_model();
  static const std::vector<float> loaded = parameter_values(*model);
  const nn::SequenceBatch heldout =
      model->make_batch(Indices({3, 4}, {1, 2, 0, 3, 2, 4, 0, 1, 3, 3, 0, 2}), 2);
  try {
    const interp::AppliedInterventions applied(*model, heldout, {parsed},
                                               [&] { model->forward(heldout); });
    model->forward(heldout);
  } catch (const ConfigError& e) {
    if (!one_line(e.what())) bug("a refusal that is not one line: " + std::string(e.what()));
  } catch (const ShapeError& e) {
    if (!one_line(e.what())) bug("a shape error that is not one line: " + std::string(e.what()));
  } catch (const std::exception& e) {
    bug("apply: unexpected exception: " + std::string(e.what()));
  }
  if (parameter_values(*model) != loaded) bug("the model's parameters changed: " + spec);
  return 0;
}
