// Writing and reading a sparse autoencoder's file, with the checkpoint's checked readers.
#include "interp/files/sae_file.h"

#include <cmath>

#include "autograd/error.h"
#include "autograd/format.h"
#include "interp/files/hdf5/datasets.h"
#include "io/hdf5/attributes.h"
#include "io/hdf5/errors.h"
#include "io/hdf5/file.h"
#include "io/hdf5/tensors.h"
#include "io/hdf5/writer.h"

namespace gradlab::interp {
namespace {

constexpr const char* kKind = "gradlab sparse autoencoder";
constexpr const char* kGroup = "sae";

SaeConfig read_config(const std::string& path, const H5::H5File& file) {
  namespace h5 = io::hdf5;
  const auto text = [&](const std::string& name) {
    return h5::read_attr(path, file, "/", name, [&](const std::string& item, const auto& attr) {
      return h5::read_string(path, item, attr);
    });
  };
  const std::string kind = text("kind");
  if (kind != kKind) {
    h5::fail(path, "/kind", quote(kind) + " is not a sparse autoencoder (\"" + kKind + "\")");
  }
  SaeConfig c;
  c.hook = text("hook");
  c.checkpoint = text("checkpoint");
  c.d_in = h5::integer_attr<int64_t>(path, file, "/", "d_in");
  c.d_sae = h5::integer_attr<int64_t>(path, file, "/", "d_sae");
  c.top_k = h5::integer_attr<int64_t>(path, file, "/", "top_k");
  c.seed = h5::integer_attr<uint64_t>(path, file, "/", "seed");
  c.model_fingerprint = h5::integer_attr<uint64_t>(path, file, "/", "model_fingerprint");
  c.l1_coefficient = h5::read_attr(
      path, file, "/", "l1_coefficient",
      [&](const std::string& item, const auto& a) { return h5::read_double(path, item, a); });
  try {
    check_sae_config(c);
  } catch (const ConfigError& e) {
    h5::fail(path, "/", e.what());
  }
  return c;
}

}  // namespace

void write_sae_file(const std::string& path, const Sae& sae) {
  hdf5::write_file(path, "the sparse autoencoder", [&](H5::H5File& file) {
    const SaeConfig& c = sae.config();
    io::hdf5::write_attr(file, "kind", std::string(kKind));
    io::hdf5::write_attr(file, "hook", c.hook);
    io::hdf5::write_attr(file, "checkpoint", c.checkpoint);
    io::hdf5::write_attr(file, "d_in", c.d_in);
    io::hdf5::write_attr(file, "d_sae", c.d_sae);
    io::hdf5::write_attr(file, "top_k", c.top_k);
    io::hdf5::write_attr(file, "seed", static_cast<uint64_t>(c.seed));
    io::hdf5::write_attr(file, "l1_coefficient", c.l1_coefficient);
    io::hdf5::write_attr(file, "model_fingerprint", static_cast<uint64_t>(c.model_fingerprint));
    const H5::Group group = io::hdf5::create_group(file, kGroup);
    for (const auto& [name, parameter] : sae.named_parameters()) {
      io::hdf5::write_tensor(group, name, parameter.to(DType::Float32));
    }
  });
}

std::shared_ptr<Sae> read_sae_file(const std::string& path) {
  namespace h5 = io::hdf5;
  h5::Source source{path, h5::open_hdf5(path), 0};
  source.size = h5::guarded(path, "/", [&] { return source.file.getFileSize(); });
  auto sae = std::make_shared<Sae>(read_config(path, source.file));
  const H5::Group group = h5::open_group(path, std::string("/") + kGroup, source.file, kGroup);
  std::vector<h5::StoredTensor> stored;
  for (const auto& [name, parameter] : sae->named_parameters()) {
    const std::string item = std::string("/") + kGroup + "/" + name;
    stored.push_back(h5::open_tensor(source, name, item, group, name));
    if (stored.back().shape != parameter.shape()) {
      h5::fail(path, item,
               "shape " + to_string(stored.back().shape) + " is not " +
                   to_string(parameter.shape()) + " (of d_in " + format_number(sae->config().d_in) +
                   ", d_sae " + format_number(sae->config().d_sae) + ")");
    }
  }
  for (const auto& [name, values] : h5::read_values(path, stored)) {
    for (const double v : values.to_vector()) {
      if (!std::isfinite(v)) h5::fail(path, std::string("/") + kGroup + "/" + name, "non-finite");
    }
    sae->parameter(name).copy_from(values.to(DType::Float32));
  }
  return sae;
}

}  // namespace gradlab::interp
