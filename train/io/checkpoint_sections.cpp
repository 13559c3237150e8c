// The groups and attributes of a checkpoint file, written and read (sections.h).
#include "train/io/checkpoint_sections.h"

#include <algorithm>
#include <map>
#include <set>

#include "io/hdf5/attributes.h"
#include "io/hdf5/errors.h"
#include "io/hdf5/types.h"
#include "io/hdf5/writer.h"

namespace gradlab::train::hdf5 {

namespace {

void write_config(const std::string& path, const H5::Group& root,
                  const std::vector<ConfigEntry>& config) {
  const H5::Group group = guarded(path, "/config", [&] { return create_group(root, "config"); });
  for (const auto& [name, value] : config) {
    guarded(path, attr_item("/config", name),
            [&] { std::visit([&](const auto& v) { write_attr(group, name, v); }, value); });
  }
}

void write_model(const std::string& path, const H5::Group& root,
                 const std::vector<nn::NamedTensor>& model) {
  const H5::Group group = guarded(path, kModelGroup, [&] { return create_group(root, "model"); });
  for (const auto& [name, tensor] : model) {
    guarded(path, kModelGroup + ("/" + name), [&] { write_tensor(group, name, tensor); });
  }
}

void write_optimizer(const std::string& path, const H5::Group& root, const CheckpointData& data) {
  const H5::Group group = guarded(path, kOptimizerGroup, [&] {
    H5::Group created = create_group(root, "optimizer");
    write_attr(created, "step", data.optimizer_step);
    return created;
  });
  std::map<std::string, H5::Group> parameters;
  for (const auto& [name, tensor] : data.optimizer_state) {
    const size_t slash = name.find('/');
    const std::string parameter = name.substr(0, slash);
    guarded(path, kOptimizerGroup + ("/" + name), [&] {
      if (!parameters.contains(parameter)) {
        parameters.emplace(parameter, create_group(group, parameter));
      }
      write_tensor(parameters.at(parameter), name.substr(slash + 1), tensor);
    });
  }
}

void write_train(const std::string& path, const H5::Group& root, const TrainState& train) {
  guarded(path, "/train", [&] {
    const H5::Group group = create_group(root, "train");
    write_attr(group, "step", train.step);
    write_attr(group, "data_seed", train.data_seed);
    write_attr(group, "dropout_rng", train.dropout_rng);
    write_attr(group, "best_metric", train.best_metric);
    write_attr(group, "best_step", train.best_step);
    write_attr(group, "loss", train.loss);
    write_attr(group, "loss_level", train.loss_level);
  });
}

}  // namespace

size_t expected_file_size(const CheckpointData& data) {
  size_t bytes = size_t{64} << 10;
  for (const auto* tensors : {&data.model, &data.optimizer_state}) {
    for (const auto& [name, tensor] : *tensors) {
      bytes += 1024 + static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype());
    }
  }
  return bytes;
}

void write_sections(const std::string& path, const H5::Group& root, const CheckpointData& data) {
  guarded(path, "/", [&] {
    write_attr(root, "format", std::string(kCheckpointFormat));
    write_attr(root, "version", kCheckpointVersion);
  });
  write_config(path, root, data.config);
  write_model(path, root, data.model);
  write_optimizer(path, root, data);
  write_train(path, root, data.train);
}

Source open_checkpoint(const std::string& path) {
  quiet_hdf5();
  Source source{path, open_hdf5(path)};
  source.size = guarded(path, "/", [&] { return source.file.getFileSize(); });
  const bool has_format = guarded(path, "/", [&] { return source.file.attrExists("format"); });
  if (!has_format) fail(path, "not a gradlab checkpoint (no root attribute 'format')");
  const std::string format =
      read_attr(path, source.file, "/", "format",
                [&](const std::string& item, const auto& a) { return read_string(path, item, a); });
  if (format != kCheckpointFormat) {
    fail(path, "format '" + format + "' is not a gradlab checkpoint");
  }
  const int64_t version = integer_attr<int64_t>(path, source.file, "/", "version");
  if (version != kCheckpointVersion) {
    fail(path, "version " + std::to_string(version) +
                   " is not supported (this build reads version " +
                   std::to_string(kCheckpointVersion) + ")");
  }
  return source;
}

std::vector<ConfigEntry> read_config(const Source& source) {
  const H5::Group group = open_group(source.path, "/config", source.file, "config");
  const std::vector<std::string> names =
      guarded(source.path, "/config", [&] { return attr_names(group); });
  std::vector<ConfigEntry> config;
  for (const std::string& name : names) {
    config.emplace_back(name, read_attr(source.path, group, "/config", name,
                                        [&](const std::string& item, const auto& a) {
                                          return read_config_value(source.path, item, a);
                                        }));
  }
  return config;
}

std::vector<StoredTensor> open_model(const Source& source) {
  const H5::Group group = open_group(source.path, kModelGroup, source.file, "model");
  std::vector<StoredTensor> model;
  for (const std::string& name :
       guarded(source.path, kModelGroup, [&] { return link_names(group); })) {
    model.push_back(open_tensor(source, name, kModelGroup + ("/" + name), group, name));
  }
  return model;
}

std::vector<StoredTensor> open_optimizer_state(const Source& source, const H5::Group& group,
                                               const std::vector<StoredTensor>& model) {
  std::set<std::string> parameters;
  for (const StoredTensor& entry : model) parameters.insert(entry.name);
  std::vector<StoredTensor> state;
  for (const std::string& parameter :
       guarded(source.path, kOptimizerGroup, [&] { return link_names(group); })) {
    const std::string item = kOptimizerGroup + ("/" + parameter);
    const H5::Group slots = open_group(source.path, item, group, parameter);
    if (!parameters.contains(parameter)) fail(source.path, item, "no such parameter in /model");
    for (const std::string& slot : guarded(source.path, item, [&] { return link_names(slots); })) {
      state.push_back(open_tensor(source, parameter + "/" + slot, item + "/" + slot, slots, slot));
    }
  }
  return state;
}

TrainState read_train(const Source& source) {
  const std::string& path = source.path;
  const H5::Group group = open_group(path, "/train", source.file, "train");
  TrainState train;
  train.step = step_attr(path, group, "/train", "step");
  train.data_seed = integer_attr<uint64_t>(path, group, "/train", "data_seed");
  const std::vector<uint64_t> rng =
      read_attr(path, group, "/train", "dropout_rng", [&](const std::string& item, const auto& a) {
        return read_integers<uint64_t>(path, item, a, 4);
      });
  std::copy(rng.begin(), rng.end(), train.dropout_rng.begin());
  train.best_metric =
      read_attr(path, group, "/train", "best_metric",
                [&](const std::string& item, const auto& a) { return read_double(path, item, a); });
  train.best_step = step_attr(path, group, "/train", "best_step");
  // Absent from files written before they were kept: their defaults, NaN, stand.
  for (const auto& [name, value] :
       {std::pair{"loss", &train.loss}, std::pair{"loss_level", &train.loss_level}}) {
    if (guarded(path, "/train", [&] { return group.attrExists(name); })) {
      *value = read_attr(path, group, "/train", name, [&](const std::string& item, const auto& a) {
        return read_double(path, item, a);
      });
    }
  }
  return train;
}

std::vector<std::pair<std::string, Shape>> shapes_of(const std::vector<StoredTensor>& tensors) {
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const StoredTensor& t : tensors) shapes.emplace_back(t.name, t.shape);
  return shapes;
}
}  // namespace gradlab::train::hdf5
