// The instruments of interp/ for Python, each a library call whose results become numpy arrays
// and dicts: head scores, the logit lens, ablation, activation and attribution patching and the
// residual
// stream's decomposition (the cache helpers of gradlab/_model.py); and the reading of
// the float datasets of the files gradlab's commands write (activations, lens), for programs
// without h5py.
#include <H5Cpp.h>

#include "autograd/graph.h"
#include "autograd/ops.h"
#include "data/tms_task.h"
#include "interp/ablation.h"
#include "interp/attribution_patching.h"
#include "interp/direct_logit_attribution.h"
#include "interp/head_scores.h"
#include "interp/logit_lens.h"
#include "interp/patching.h"
#include "interp/path_patching.h"
#include "python/src/bindings.h"
#include "train/trainer.h"

namespace gradlab::python {
namespace {

py::dict metrics_dict(const train::Metrics& m) {
  py::dict d;
  d["loss"] = m.loss;
  d["token_accuracy"] = m.token_accuracy;
  d["exact_match"] = m.exact_match;
  for (const train::PartLoss& part : m.parts) d[py::str(part.name + "_loss")] = part.loss;
  return d;
}

// A cache of Python's (name -> numpy array) as the points the decomposition reads.
interp::PointReader dict_reader(const py::dict& cache) {
  return [cache](const std::string& name) {
    if (!cache.contains(name)) {
      throw py::key_error("'" + name + "' is not cached: the residual stream's helpers read it " +
                          "(run_with_cache with names_filter=None caches every point)");
    }
    return from_numpy(cache[py::str(name)], name);
  };
}

py::tuple labelled(const interp::ResidualStack& parts) {
  return py::make_tuple(py::cast(parts.labels), to_numpy(parts.stack));
}

// The residual stream's decomposition, its frozen norm and the unembedding: the logic of the
// cache's decompose_resid, stack_head_results, accumulated_resid, apply_ln_to_stack and
// logit_attrs.
void bind_residual_stream(py::module_& m) {
  m.def(
      "residual_blocks", [](const Checkpoint& c) { return interp::residual_blocks(*c.model); },
      py::arg("model"));
  m.def(
      "residual_point",
      [](const Checkpoint& c, int64_t layer) { return interp::residual_point(*c.model, layer); },
      py::arg("model"), py::arg("layer"));
  m.def(
      "decompose_residual",
      [](const Checkpoint& c, const py::dict& cache, int64_t layer, bool heads, bool attention,
         bool mlp, bool embeddings, bool biases) {
        const interp::DecomposeOptions options{
            .layer = layer,
            .grain = heads ? interp::ResidualGrain::Heads : interp::ResidualGrain::Sublayers,
            .attention = attention,
            .mlp = mlp,
            .embeddings = embeddings,
            .biases = biases};
        return labelled(interp::decompose_residual(*c.model, dict_reader(cache), options));
      },
      py::arg("model"), py::arg("cache"), py::arg("layer"), py::arg("heads"), py::arg("attention"),
      py::arg("mlp"), py::arg("embeddings"), py::arg("biases"));
  m.def(
      "apply_frozen_norm",
      [](const Checkpoint& c, const py::handle& stack, const py::handle& residual, int64_t layer,
         bool fold_ln) {
        return to_numpy(interp::apply_frozen_norm(*c.model, from_numpy(stack, "residual_stack"),
                                                  from_numpy(residual, "residual"), layer,
                                                  fold_ln));
      },
      py::arg("model"), py::arg("stack"), py::arg("residual"), py::arg("layer"),
      py::arg("fold_ln"));
  m.def(
      "normalized_parts",
      [](const Checkpoint& c, const std::vector<std::string>& labels, const py::handle& stack,
         const py::handle& residual, int64_t layer, bool fold_ln) {
        const interp::ResidualStack parts{labels, from_numpy(stack, "residual_stack")};
        return labelled(interp::normalized_parts(*c.model, parts, from_numpy(residual, "residual"),
                                                 layer, fold_ln));
      },
      py::arg("model"), py::arg("labels"), py::arg("stack"), py::arg("residual"), py::arg("layer"),
      py::arg("fold_ln"));
  m.def(
      "unembedding",
      [](const Checkpoint& c, bool fold_ln) {
        const interp::Unembedding u = interp::unembedding(*c.model, fold_ln);
        return py::make_tuple(to_numpy(u.weight),
                              u.bias.defined() ? py::object(to_numpy(u.bias)) : py::none());
      },
      py::arg("model"), py::arg("fold_ln"), "(W_U [C, V], b_U [V] or None)");
}

// The clean and corrupted batches of patch() and attribution_patch(), and the sites their
// patterns name (a KeyError naming the closest points when none).
struct PatchInputs {
  nn::SequenceBatch clean, corrupt;
  std::vector<interp::PatchSite> sites;
};

PatchInputs patch_inputs(Checkpoint& c, const py::handle& clean, const py::handle& corrupt,
                         const py::handle& source_clean, const py::handle& source_corrupt,
                         const std::vector<std::string>& patterns, bool per_position,
                         const std::string& what) {
  PatchInputs in{make_batch(c, clean, source_clean, py::none()),
                 make_batch(c, corrupt, source_corrupt, py::none()),
                 {}};
  try {
    in.sites = interp::patch_sites(c.points(), nn::any_of_points(c.points(), patterns, what),
                                   per_position);
  } catch (const ConfigError& e) {
    throw py::key_error(e.what());
  }
  return in;
}

}  // namespace

// A toy model of superposition's geometry (data::superposition), as `gradlab superposition`:
// numpy arrays [I, m, n] of W, [I, n] per feature, [I] of the densities.
py::dict superposition_dict(const Checkpoint& c) {
  const data::Superposition s = data::superposition(*c.model, *c.task);
  const nn::FeatureGeometry& g = s.geometry;
  const auto per_feature = [&](const std::vector<double>& values) {
    py::array_t<double> array({g.instances, g.features});
    std::copy(values.begin(), values.end(), array.mutable_data());
    return array;
  };
  py::dict d;
  d["weight"] = to_numpy(s.weight);
  d["norms"] = per_feature(g.norms);
  d["dimensionality"] = per_feature(g.dimensionality);
  d["angles"] = g.angles.empty() ? py::object(py::none()) : py::object(per_feature(g.angles));
  d["densities"] =
      py::array_t<double>(static_cast<py::ssize_t>(s.densities.size()), s.densities.data());
  return d;
}

void bind_instruments(py::module_& m) {
  bind_residual_stream(m);
  m.def("superposition", &superposition_dict, py::arg("model"));
  m.def(
      "heads",
      [](Checkpoint& c, const interp::HeadScoreOptions& options) {
        c.mark_parameters_written();
        std::vector<interp::LayerHeadScores> scores;
        {
          py::gil_scoped_release release;
          scores = interp::head_scores(*c.model, options);
        }
        c.model->eval();
        py::dict out;
        for (const interp::LayerHeadScores& s : scores) {
          py::dict d;
          d["previous_token"] = py::array(py::cast(s.previous_token));
          d["duplicate_token"] = py::array(py::cast(s.duplicate_token));
          d["induction"] = py::array(py::cast(s.induction));
          out[py::str(s.point)] = d;
        }
        return out;
      },
      py::arg("model"), py::arg("options"));
  py::class_<interp::HeadScoreOptions>(m, "HeadScoreOptions")
      .def(py::init<>())
      .def_readwrite("length", &interp::HeadScoreOptions::length)
      .def_readwrite("sequences", &interp::HeadScoreOptions::sequences)
      .def_readwrite("seed", &interp::HeadScoreOptions::seed);

  m.def(
      "lens",
      [](Checkpoint& c, const py::handle& tokens, const py::handle& source) {
        const nn::SequenceBatch batch = make_batch(c, tokens, source, py::none());
        c.mark_parameters_written();
        std::vector<interp::LensLayer> lens;
        {
          py::gil_scoped_release release;
          NoGradGuard no_graph;
          lens = interp::logit_lens(*c.model, batch);
        }
        py::dict out;
        for (const interp::LensLayer& layer : lens)
          out[py::str(layer.name)] = to_numpy(layer.logits);
        return out;
      },
      py::arg("model"), py::arg("tokens"), py::arg("source"));

  m.def(
      "ablate",
      [](const std::string& path, const std::string& mode_name,
         const std::vector<std::pair<std::string, int64_t>>& together) {
        const interp::AblationModeRow* mode = nullptr;
        std::string names;
        for (const interp::AblationModeRow& row : interp::ablation_modes()) {
          if (mode_name == row.name) mode = &row;
          names += (names.empty() ? "" : ", ") + std::string(row.name);
        }
        if (!mode) throw py::value_error("ablate: mode '" + mode_name + "' is not one of " + names);
        const train::LoadedRun run = train::load_run(path);
        train::Trainer& trainer = *run.trainer;
        // What the ablation scores: the trainer's held-out evaluation, as `gradlab ablate`.
        const interp::HeldOutEvaluation<train::Metrics> heldout{
            trainer.model(), trainer.heldout(), [&trainer] { return trainer.evaluate(); }};
        py::dict out;
        if (!together.empty()) {
          std::vector<interp::ModelPart> parts;
          for (const auto& [point, head] : together) parts.push_back({point, head});
          py::gil_scoped_release release;
          const train::Metrics intact = trainer.evaluate();
          const train::Metrics ablated = interp::ablate_together(heldout, mode->id, parts);
          py::gil_scoped_acquire gil;
          out["intact"] = metrics_dict(intact);
          out["ablated"] = metrics_dict(ablated);
          return out;
        }
        interp::AblationResults<train::Metrics> results;
        {
          py::gil_scoped_release release;
          results = interp::ablate_each_part(heldout, mode->id);
        }
        out["intact"] = metrics_dict(results.intact);
        py::list parts;
        for (const interp::AblatedPart<train::Metrics>& part : results.parts) {
          py::dict d = metrics_dict(part.metrics);
          d["point"] = part.point;
          d["head"] = part.head;
          parts.append(d);
        }
        out["parts"] = parts;
        return out;
      },
      py::arg("path"), py::arg("mode"), py::arg("together"));

  m.def(
      "patch",
      [](Checkpoint& c, const py::handle& clean, const py::handle& corrupt,
         const py::handle& source_clean, const py::handle& source_corrupt,
         const std::vector<std::string>& patterns, bool per_position, py::function metric) {
        const PatchInputs in = patch_inputs(c, clean, corrupt, source_clean, source_corrupt,
                                            patterns, per_position, "patch");
        const nn::SequenceBatch &a = in.clean, &b = in.corrupt;
        const std::vector<interp::PatchSite>& sites = in.sites;
        c.mark_parameters_written();
        interp::PatchedMetrics result;
        {
          py::gil_scoped_release release;
          result = interp::patch_each(*c.model, a, b, sites, [&](const Tensor& logits) {
            py::gil_scoped_acquire gil;
            return metric(to_numpy(logits)).cast<double>();
          });
        }
        py::list rows;
        for (const interp::PatchSite& s : sites)
          rows.append(py::make_tuple(s.point, s.head, s.position));
        py::dict out;
        out["clean"] = result.clean;
        out["corrupt"] = result.corrupt;
        out["sites"] = rows;
        out["patched"] = py::array(py::cast(result.patched));
        return out;
      },
      py::arg("model"), py::arg("clean"), py::arg("corrupt"), py::arg("source_clean"),
      py::arg("source_corrupt"), py::arg("patterns"), py::arg("per_position"), py::arg("metric"));

  m.def(
      "patch_path",
      [](Checkpoint& c, const py::handle& clean, const py::handle& corrupt, const std::string& spec,
         py::function metric) {
        const nn::SequenceBatch a = make_batch(c, clean, py::none(), py::none());
        const nn::SequenceBatch b = make_batch(c, corrupt, py::none(), py::none());
        const interp::PathSpec path = interp::parse_path(spec, c.points());
        c.mark_parameters_written();
        interp::PathPatchResult result;
        {
          py::gil_scoped_release release;
          result = interp::patch_path(*c.model, a, b, path, [&](const Tensor& logits) {
            py::gil_scoped_acquire gil;
            return metric(to_numpy(logits)).cast<double>();
          });
        }
        py::list senders, receivers;
        for (const interp::PathSender& s : path.senders) senders.append(interp::path_name(s));
        for (const interp::PathReceiver& r : path.receivers) receivers.append(interp::path_name(r));
        py::dict out;
        out["clean"] = result.clean;
        out["corrupt"] = result.corrupt;
        out["patched"] = result.patched;
        out["score"] = result.score();
        out["senders"] = senders;
        out["receivers"] = receivers;
        return out;
      },
      py::arg("model"), py::arg("clean"), py::arg("corrupt"), py::arg("path"), py::arg("metric"));

  m.def(
      "attribution_patch",
      [](Checkpoint& c, const py::handle& clean, const py::handle& corrupt,
         const py::handle& source_clean, const py::handle& source_corrupt,
         const std::vector<std::string>& patterns, bool per_position, py::function metric) {
        const PatchInputs in = patch_inputs(c, clean, corrupt, source_clean, source_corrupt,
                                            patterns, per_position, "attribution_patch");
        const nn::SequenceBatch &a = in.clean, &b = in.corrupt;
        const std::vector<interp::PatchSite>& sites = in.sites;
        c.mark_parameters_written();
        // metric(logits) -> (value, gradient): in the graph as sum(logits * gradient), shifted
        // to the value, whose backward pass carries that gradient.
        const interp::DifferentiableMetric differentiable = [&](const Tensor& logits) {
          py::gil_scoped_acquire gil;
          const py::tuple pair = metric(to_numpy(logits.detach().clone()));
          if (pair.size() != 2) {
            throw py::value_error(
                "attribution_patch: metric(logits) must return (value, gradient)");
          }
          const Tensor gradient = from_numpy(pair[1], "the metric's gradient").to(logits.dtype());
          if (gradient.shape() != logits.shape()) {
            throw py::value_error("attribution_patch: the metric's gradient has shape " +
                                  to_string(gradient.shape()) + ", the logits " +
                                  to_string(logits.shape()));
          }
          const Tensor surrogate = sum(logits * gradient);
          return surrogate + (pair[0].cast<double>() - surrogate.item());
        };
        interp::AttributedMetrics result;
        {
          py::gil_scoped_release release;
          result = interp::attribute_each(*c.model, a, b, sites, differentiable);
        }
        py::list rows;
        for (const interp::PatchSite& s : sites)
          rows.append(py::make_tuple(s.point, s.head, s.position));
        py::dict out;
        out["clean"] = result.clean;
        out["corrupt"] = result.corrupt;
        out["sites"] = rows;
        out["estimated"] = py::array(py::cast(result.estimated));
        return out;
      },
      py::arg("model"), py::arg("clean"), py::arg("corrupt"), py::arg("source_clean"),
      py::arg("source_corrupt"), py::arg("patterns"), py::arg("per_position"), py::arg("metric"));

  m.def(
      "read_dataset",
      [](const std::string& path, const std::string& name) -> py::array {
        try {
          H5::Exception::dontPrint();
          const H5::H5File file(path, H5F_ACC_RDONLY);
          const H5::DataSet set = file.openDataSet(name);
          const H5::DataSpace space = set.getSpace();
          std::vector<hsize_t> dims(space.getSimpleExtentNdims());
          space.getSimpleExtentDims(dims.data());
          const std::vector<py::ssize_t> shape(dims.begin(), dims.end());
          const auto read = [&]<class T>(const H5::PredType& type) {
            py::array_t<T> out(shape);
            set.read(out.mutable_data(), type);
            return out;
          };
          if (set.getTypeClass() == H5T_INTEGER)
            return read.operator()<int64_t>(H5::PredType::NATIVE_INT64);
          if (set.getDataType().getSize() == 8)
            return read.operator()<double>(H5::PredType::NATIVE_DOUBLE);
          return read.operator()<float>(H5::PredType::NATIVE_FLOAT);
        } catch (const H5::Exception&) {
          throw py::key_error(path + ": no numeric dataset '" + name + "'");
        }
      },
      py::arg("path"), py::arg("name"), "a numeric dataset of an HDF5 file gradlab wrote");
}

}  // namespace gradlab::python
