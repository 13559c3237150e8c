// gradlab.train and gradlab.tasks for Python: a run's settings arrive as (key, text) pairs, the
// keys of `gradlab train`'s flags and config files, read through the same field table
// (train::config_fields), and the run goes through the same claim of its directory, steps
// (train/training_run.h), Trainer and train::fit as the command line's, so that its checkpoints
// are the same bit for bit.
#include <charconv>
#include <filesystem>

#include "autograd/threads.h"
#include "data/tasks.h"
#include "python/src/bindings.h"
#include "train/metrics_log.h"
#include "train/training_run.h"

namespace gradlab::python {
namespace {

namespace fs = std::filesystem;
using Settings = std::vector<std::pair<std::string, std::string>>;

template <class T>
T parse_number(const std::string& key, const std::string& text) {
  T value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
    throw py::value_error(key + ": expected a number, got '" + text + "'");
  }
  return value;
}

bool parse_bool(const std::string& key, const std::string& text) {
  if (text == "true" || text == "1" || text == "yes" || text == "on") return true;
  if (text == "false" || text == "0" || text == "no" || text == "off") return false;
  throw py::value_error(key + ": expected true or false, got '" + text + "'");
}

// The settings over RunConfig's defaults, checked as `gradlab train` checks its flags; the
// task's own defaults apply where the settings leave them (mqar's symbols).
train::RunConfig run_config(const Settings& settings) {
  train::RunConfig config;
  std::vector<std::string> given;
  for (const auto& [key, text] : settings) {
    bool known = false;
    for (const train::ConfigField& f : train::config_fields(config)) {
      if (!f.flag || (key != f.key && (!f.old_key || key != f.old_key))) continue;
      known = true;
      given.push_back(f.key);
      std::visit(
          [&]<class P>(P* p) {
            if constexpr (std::is_same_v<P, bool>) {
              *p = parse_bool(key, text);
            } else if constexpr (std::is_same_v<P, std::string>) {
              *p = text;
            } else {
              *p = parse_number<P>(key, text);
            }
          },
          f.value);
    }
    if (key == "out") {
      config.out_dir = text;
      known = true;
    }
    if (!known)
      throw py::key_error("unknown setting '" + key + "' (gradlab train --help lists them)");
  }
  data::apply_own_defaults(config.task, [&](const char* key) {
    return std::find(given.begin(), given.end(), key) != given.end();
  });
  if (data::task_kind(config.task.name).own_data) {
    throw py::value_error("task " + config.task.name + ": a program's own data; train runs " +
                          data::task_names());
  }
  return config;
}

py::dict scores_dict(const train::Scores& s) {
  py::dict d;
  d["loss"] = s.loss;
  d["token_accuracy"] = s.token_accuracy;
  d["exact_match"] = s.exact_match;
  return d;
}

// metrics.csv as the command line writes it, and the Python callback at every evaluation.
class CallbackObserver : public train::MetricsObserver {
 public:
  CallbackObserver(const train::RunConfig& config, const data::Task& task, int64_t first_step,
                   py::object callback)
      : MetricsObserver((fs::path(config.out_dir) / "metrics.csv").string(), config.steps,
                        first_step, task.training_set_size() > 0, task.loss_parts()),
        callback_(std::move(callback)) {}

  void on_evaluation(int64_t step, const train::StepResult& last,
                     const train::Metrics& metrics) override {
    MetricsObserver::on_evaluation(step, last, metrics);
    if (callback_.is_none() || error_) return;
    py::gil_scoped_acquire gil;
    try {
      py::dict d = scores_dict(metrics);
      d["train_loss"] = last.loss;
      d["grad_norm"] = last.grad_norm;
      d["lr"] = last.lr;
      if (metrics.train) d["training_set"] = scores_dict(*metrics.train);
      for (const train::PartLoss& part : metrics.parts) d[py::str(part.name + "_loss")] = part.loss;
      const py::object answer = callback_(step, d);
      if (!answer.is_none() && !answer.cast<bool>()) stop_ = true;
    } catch (py::error_already_set&) {
      error_ = std::current_exception();
    }
  }
  bool should_stop() override { return stop_ || error_; }
  std::exception_ptr error() const { return error_; }

 private:
  py::object callback_;
  bool stop_ = false;
  std::exception_ptr error_;
};

// The batches of a task as a model of the run's kind reads them.
struct TaskBatches {
  train::RunConfig config;
  std::shared_ptr<const data::DataSource> source;
};

py::dict batch_dict(const nn::SequenceBatch& batch) {
  py::dict d;
  d["tokens"] = indices_to_numpy(batch.inputs);
  d["targets"] = indices_to_numpy(batch.targets);
  py::array_t<bool> mask(
      std::vector<py::ssize_t>(batch.targets.shape.begin(), batch.targets.shape.end()));
  for (size_t i = 0; i < batch.targets.values.size(); ++i) {
    mask.mutable_data()[i] = batch.targets.values[i] != nn::kIgnoreTarget;
  }
  d["loss_mask"] = mask;
  if (batch.source.numel() > 0) d["source"] = indices_to_numpy(batch.source);
  return d;
}

}  // namespace

void bind_training(py::module_& m) {
  m.def(
      "train",
      [](const Settings& settings, bool overwrite, py::object callback) {
        train::RunConfig config = run_config(settings);
        if (config.out_dir.empty()) throw py::value_error("train: out=DIR is required");
        const train::RunDirectoryClaim claim =
            train::claim_run_directory({.dir = config.out_dir,
                                        .resume = "",
                                        .resumed_step = std::nullopt,
                                        .overwrite = overwrite});
        const std::shared_ptr<const data::Task> task = train::prepare_run(config);
        const int threads_before = threads();
        set_threads(static_cast<int>(config.threads));
        train::Trainer trainer(config, task);
        train::start_run_directory(config, claim);
        CallbackObserver observer(config, *task, trainer.step(), std::move(callback));
        const train::LoopPolicy policy = train::loop_policy(config, *task, claim);
        train::FitResult result;
        {
          py::gil_scoped_release release;
          result = train::fit(trainer, policy, observer);
          set_threads(threads_before);
        }
        if (observer.error()) std::rethrow_exception(observer.error());
        if (result.reason == train::StopReason::Diverged) {
          throw py::value_error("train: stopped: " + result.error);
        }
        py::dict out = scores_dict(result.last_metrics);
        out["checkpoint"] = result.checkpoint;
        out["steps"] = trainer.step();
        out["out"] = config.out_dir;
        return out;
      },
      py::arg("settings"), py::arg("overwrite"), py::arg("callback"));

  py::class_<TaskBatches>(m, "TaskBatches")
      .def(py::init([](const Settings& settings) {
             train::RunConfig config = run_config(settings);
             const std::shared_ptr<const data::Task> task = train::prepare_run(config);
             const auto model = nn::make_sequence_model(config.model, config.net);
             return TaskBatches{config, task->data_source(model, config.seed, config.batch_size,
                                                          config.eval_size)};
           }),
           py::arg("settings"))
      .def(
          "batch",
          [](const TaskBatches& t, int64_t step) {
            if (step < 1)
              throw py::value_error("batch: steps count from 1, got " + std::to_string(step));
            return batch_dict(t.source->training_batch(step));
          },
          py::arg("step"))
      .def("heldout", [](const TaskBatches& t) { return batch_dict(t.source->heldout()); })
      .def_property_readonly("vocab_size",
                             [](const TaskBatches& t) { return t.config.net.vocab_size; });
}

}  // namespace gradlab::python
