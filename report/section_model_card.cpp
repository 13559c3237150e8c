// The report's configuration and model card: the run's config.ini as written by train, the
// parameter table with each axis named by the letters of docs/model.md, and the hook points.
#include <fstream>

#include "nn/hooks.h"
#include "report/sections.h"

namespace gradlab::report {
namespace {

// The run's configuration, key = value lines in file order (comments skipped).
nlohmann::json config_lines(const std::string& path) {
  nlohmann::json lines = nlohmann::json::array();
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const size_t equals = line.find(" = ");
    if (line.empty() || line[0] == '#' || equals == std::string::npos) continue;
    lines.push_back({line.substr(0, equals), line.substr(equals + 3)});
  }
  return lines;
}

// An axis of a parameter named by the first letter whose size it has (several sizes may
// coincide: the first in this order wins), else its number.
std::string axis_letters(const nn::ModelConfig& c, const Shape& shape) {
  const int64_t heads = c.attention.num_heads;
  const int64_t kv = c.attention.num_kv_heads > 0 ? c.attention.num_kv_heads : heads;
  const int64_t head_size = heads > 0 ? c.d_model / heads : 0;
  const std::vector<std::pair<const char*, int64_t>> sizes = {
      {"C", c.d_model}, {"F", c.feed_forward.d_ff}, {"V", c.vocab_size},     {"T", c.max_len},
      {"H", heads},     {"D", head_size},           {"KV*D", kv * head_size}};
  std::string letters = "[";
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    std::string name = std::to_string(shape[axis]);
    for (const auto& [letter, size] : sizes) {
      if (size == shape[axis]) {
        name = letter;
        break;
      }
    }
    letters += (axis ? ", " : "") + name;
  }
  return letters + "]";
}

}  // namespace

SectionResult collect_model_card(ReportRun& run) {
  nlohmann::json data = {{"config", config_lines(run.path("config.ini"))}};
  if (!run.has("best.h5")) {
    data["missing_model"] = "no checkpoint: best.h5 is written at the first evaluation";
    return {data, ""};
  }
  train::TrainedModel& trained = run.trained();
  const nn::ModelConfig& config = trained.model->config();
  nlohmann::json parameters = nlohmann::json::array();
  int64_t total = 0;
  for (const auto& [name, tensor] : trained.model->named_parameters()) {
    parameters.push_back({{"name", name},
                          {"shape", tensor.shape()},
                          {"letters", axis_letters(config, tensor.shape())},
                          {"count", tensor.numel()}});
    total += tensor.numel();
  }
  data["checkpoint_step"] = trained.step;
  data["parameters"] = std::move(parameters);
  data["total_parameters"] = total;
  if (const ReportPrompt* prompt = run.prompt()) {
    nlohmann::json points = nlohmann::json::array();
    for (const nn::HookPointInfo& point : nn::hook_points(*trained.model, prompt->batch)) {
      points.push_back({{"name", point.name}, {"letters", point.letters}});
    }
    data["hook_points"] = std::move(points);
  }
  return {data, ""};
}

}  // namespace gradlab::report
