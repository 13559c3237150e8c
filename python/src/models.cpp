// gradlab.load and the model a checkpoint holds: its configuration, parameters (writable views),
// hook points, forward pass and loss, tokenizer, generation and saving.
#include <filesystem>

#include "autograd/graph.h"
#include "autograd/ops.h"
#include "nn/generate.h"
#include "nn/hooks.h"
#include "python/src/bindings.h"
#include "train/checkpoint.h"
#include "train/trained_model.h"

namespace gradlab::python {
namespace {

py::object config_value(const train::ConfigValue& value) {
  return std::visit([](const auto& v) -> py::object { return py::cast(v); }, value);
}

}  // namespace

nn::SequenceBatch longest_batch(const Checkpoint& c) {
  // Laid out by the model: a decoder reads [1, max_len], an encoder-decoder half each side.
  const int64_t length = c.model->config().max_len;
  return c.model->make_batch(Indices({1, length + 1}, std::vector<int64_t>(length + 1, 0)),
                             length / 2);
}

void Checkpoint::mark_parameters_written() {
  if (!views_out) return;
  for (Tensor& p : model->parameters()) p.node()->storage->mark_written();
}

std::shared_ptr<Checkpoint> load_checkpoint(const std::string& path) {
  auto checkpoint = std::make_shared<Checkpoint>();
  static_cast<train::TrainedModel&>(*checkpoint) = train::load_trained_model(path);
  checkpoint->model->eval();  // as the command line runs a loaded model: no dropout
  return checkpoint;
}

nn::SequenceBatch make_batch(const Checkpoint& c, const py::handle& tokens,
                             const py::handle& source, const py::handle& targets) {
  const int64_t vocab = c.model->config().vocab_size;
  nn::SequenceBatch batch;
  batch.inputs = to_tokens(tokens, vocab, "tokens");
  if (!source.is_none()) batch.source = to_tokens(source, vocab, "source");
  if (!targets.is_none()) {
    const py::array array = py::array::ensure(targets);
    const auto ids = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(array);
    if (!ids) throw py::type_error("targets: expected integer token ids");
    Shape shape(ids.shape(), ids.shape() + ids.ndim());
    if (shape.size() == 1) shape.insert(shape.begin(), 1);
    if (shape != batch.inputs.shape) {
      throw py::value_error("targets " + to_string(shape) + " do not match tokens " +
                            to_string(batch.inputs.shape) + " [B, T]");
    }
    batch.targets = Indices(shape, std::vector<int64_t>(ids.data(), ids.data() + ids.size()));
    return batch;
  }
  const int64_t rows = batch.inputs.shape[0], length = batch.inputs.shape[1];
  batch.targets = Indices(batch.inputs.shape,
                          std::vector<int64_t>(batch.inputs.values.size(), nn::kIgnoreTarget));
  for (int64_t b = 0; b < rows; ++b) {
    for (int64_t t = 0; t + 1 < length; ++t) {
      batch.targets.values[b * length + t] = batch.inputs.values[b * length + t + 1];
    }
  }
  return batch;
}

void bind_models(py::module_& m) {
  py::class_<data::Vocabulary>(m, "Tokenizer", "a language model's tokenizer (char or byte)")
      .def("encode", &data::Vocabulary::encode, py::arg("text"))
      .def(
          "decode",
          [](const data::Vocabulary& v, const std::vector<int64_t>& tokens) {
            std::string text;
            for (const int64_t token : tokens) {
              if (token < 0 || token >= v.size()) {
                throw py::index_error("to_string: token id " + std::to_string(token) +
                                      " is outside the vocabulary [0, " + std::to_string(v.size()) +
                                      ")");
              }
              text += v.decode(token);
            }
            return text;
          },
          py::arg("tokens"))
      .def_property_readonly("size", &data::Vocabulary::size);

  py::class_<Checkpoint, std::shared_ptr<Checkpoint>>(m, "Model")
      .def_property_readonly("cfg",
                             [](const Checkpoint& c) {
                               py::dict cfg;
                               for (const auto& [key, value] : train::to_entries(c.config)) {
                                 cfg[py::str(key)] = config_value(value);
                               }
                               return cfg;
                             })
      .def_property_readonly(
          "tokenizer",
          [](const Checkpoint& c) -> const data::Vocabulary* {
            return c.vocabulary ? &*c.vocabulary : nullptr;
          },
          py::return_value_policy::reference_internal)
      .def_property_readonly(
          "dtype",
          [](const Checkpoint& c) { return dtype_name(c.model->parameters().front().dtype()); })
      .def(
          "to",
          [](Checkpoint& c, const std::string& dtype) {
            if (dtype != "float32" && dtype != "float64") {
              throw py::value_error("to: expected float32 or float64, got " + dtype);
            }
            c.model->to(dtype == "float32" ? DType::Float32 : DType::Float64);
          },
          py::arg("dtype"))
      .def("named_parameters",
           [](Checkpoint& c) {
             c.views_out = true;
             py::dict out;
             for (const auto& [name, tensor] : c.model->named_parameters()) {
               out[py::str(name)] = to_numpy(tensor);
             }
             return out;
           })
      .def("named_gradients",
           [](Checkpoint& c) {
             py::dict out;
             for (const auto& [name, tensor] : c.model->named_parameters()) {
               const Tensor grad = tensor.grad();
               out[py::str(name)] =
                   to_numpy(grad.defined() ? grad : Tensor::zeros(tensor.shape(), tensor.dtype()));
             }
             return out;
           })
      .def(
          "hook_points",
          [](Checkpoint& c, const py::handle& tokens, const py::handle& source) {
            const nn::SequenceBatch batch =
                tokens.is_none() ? longest_batch(c) : make_batch(c, tokens, source, py::none());
            std::vector<nn::HookPointInfo> points;
            {
              py::gil_scoped_release release;
              points = nn::hook_points(*c.model, batch);
            }
            py::dict out;
            for (const nn::HookPointInfo& p : points) {
              out[py::str(p.name)] = py::make_tuple(py::tuple(py::cast(p.shape)), p.letters);
            }
            return out;
          },
          py::arg("tokens") = py::none(), py::arg("source") = py::none())
      .def(
          "forward",
          [](Checkpoint& c, const py::handle& tokens, const py::handle& source,
             const py::handle& targets, bool loss) -> py::object {
            const nn::SequenceBatch batch = make_batch(c, tokens, source, targets);
            c.mark_parameters_written();
            Tensor logits, value;
            {
              py::gil_scoped_release release;
              NoGradGuard no_graph;
              logits = c.model->forward(batch);
              if (loss) value = nn::sequence_loss(logits, batch);
            }
            if (loss) return py::float_(value.item());
            return to_numpy(logits);
          },
          py::arg("tokens"), py::arg("source") = py::none(), py::arg("targets") = py::none(),
          py::arg("loss") = false)
      .def(
          "generate",
          [](Checkpoint& c, const std::vector<int64_t>& prompt,
             const nn::SamplingOptions& options) {
            const data::LanguageModelTask* language_model = c.language_model();
            if (!language_model) {
              throw py::value_error("generate: a " + c.task->name() +
                                    " model, not a language model");
            }
            to_tokens(py::cast(prompt), c.model->config().vocab_size, "generate: prompt");
            c.mark_parameters_written();
            std::vector<int64_t> tokens;
            {
              py::gil_scoped_release release;
              tokens = nn::generate(*c.model, language_model->context(), prompt, options);
            }
            c.model->eval();
            return tokens;
          },
          py::arg("prompt"), py::arg("options"))
      .def(
          "save",
          [](Checkpoint& c, const std::string& source_path, const std::string& path,
             bool overwrite) {
            std::error_code ignored;
            if (!overwrite && std::filesystem::exists(path, ignored)) {
              PyErr_SetString(PyExc_FileExistsError,
                              (path + ": exists; save(..., overwrite=True) replaces it").c_str());
              throw py::error_already_set();
            }
            train::CheckpointData data;
            const train::CheckpointHeader header = train::read_checkpoint_header(source_path);
            data.config = header.config;
            data.train = header.train;
            data.train.dropout_rng = c.model->dropout_gen->state();
            for (const auto& [name, tensor] : c.model->named_parameters()) {
              data.model.emplace_back(name, tensor);
            }
            py::gil_scoped_release release;
            train::save_checkpoint(path, data);
          },
          py::arg("source_path"), py::arg("path"), py::arg("overwrite") = false);

  py::class_<nn::SamplingOptions>(m, "SamplingOptions")
      .def(py::init<>())
      .def_readwrite("tokens", &nn::SamplingOptions::tokens)
      .def_readwrite("temperature", &nn::SamplingOptions::temperature)
      .def_readwrite("top_k", &nn::SamplingOptions::top_k)
      .def_readwrite("seed", &nn::SamplingOptions::seed)
      .def_readwrite("use_cache", &nn::SamplingOptions::use_cache);

  m.def("load", &load_checkpoint, py::arg("path"), "the model of a checkpoint gradlab wrote");
}

}  // namespace gradlab::python
