// The table of the report's sections, the run they read, and the document they make.
#include "report/sections.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "autograd/error.h"

namespace gradlab::report {

const std::vector<Section>& sections() {
  static const std::vector<Section> table = {
      {"model_card", "Configuration and model", true, collect_model_card},
      {"curves", "Training curves", true, collect_curves},
      {"attention", "Attention patterns", true, collect_attention},
      {"head_scores", "Head scores", false, collect_head_scores},
      {"ablation", "Ablation", false, collect_ablation},
      {"patching", "Activation patching", false, collect_patching},
      {"logit_lens", "Logit lens", false, collect_logit_lens},
      {"dla", "Direct logit attribution", false, collect_dla},
      {"fourier", "Fourier spectrum", false, collect_fourier},
  };
  return table;
}

ReportRun::ReportRun(std::string run_dir, std::optional<ReportPrompt> prompt)
    : dir_(std::move(run_dir)), prompt_(std::move(prompt)) {}

std::string ReportRun::path(const std::string& file) const {
  return (std::filesystem::path(dir_) / file).string();
}

bool ReportRun::has(const std::string& file) const {
  return std::filesystem::exists(path(file));
}

train::TrainedModel& ReportRun::trained() {
  if (!trained_) trained_ = train::load_trained_model(path("best.h5"));
  return *trained_;
}

train::Trainer& ReportRun::scorer() {
  if (!scorer_) scorer_ = train::scoring_trainer(trained());
  return *scorer_;
}

std::string ReportRun::token_text(int64_t token) {
  const std::optional<data::Vocabulary>& vocabulary = trained().vocabulary;
  return vocabulary ? vocabulary->decode(token) : std::to_string(token);
}

nlohmann::json collect_report(ReportRun& run, bool live) {
  nlohmann::json page = {{"title", std::filesystem::path(run.dir()).filename().string()},
                         {"run", run.dir()},
                         {"live", live},
                         {"sections", nlohmann::json::array()}};
  for (const Section& section : sections()) {
    nlohmann::json entry = {{"id", section.id}, {"title", section.title}};
    if (live && !section.live) {
      entry["missing"] = "computed when the run ends";
    } else {
      try {
        SectionResult result = section.collect(run);
        if (result.data.is_null() && result.missing.empty()) continue;  // does not apply
        if (result.missing.empty()) {
          entry["data"] = std::move(result.data);
        } else {
          entry["missing"] = result.missing;
        }
      } catch (const std::exception& e) {
        entry["missing"] = std::string("could not compute: ") + e.what();
      }
    }
    page["sections"].push_back(std::move(entry));
  }
  return page;
}

namespace {

std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  std::string cell;
  while (std::getline(in, cell, ',')) out.push_back(cell);
  if (!line.empty() && line.back() == ',') out.emplace_back();
  return out;
}

nlohmann::json csv_number(const std::string& cell) {
  try {
    size_t used = 0;
    const double value = std::stod(cell, &used);
    if (used == cell.size()) return value;
  } catch (const std::exception&) {
    // not a number: null below
  }
  return nullptr;
}

}  // namespace

nlohmann::json csv_columns(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return nullptr;
  const std::vector<std::string> names = csv_cells(line);
  nlohmann::json columns = nlohmann::json::object();
  for (const std::string& name : names) columns[name] = nlohmann::json::array();
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const std::vector<std::string> row = csv_cells(line);
    for (size_t i = 0; i < names.size(); ++i) {
      columns[names[i]].push_back(i < row.size() ? csv_number(row[i]) : nlohmann::json());
    }
  }
  return columns;
}

std::string base64_floats(const std::vector<float>& values) {
  static const char* const digits =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());  // x86: little
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t word = 0;
    for (size_t k = 0; k < 3; ++k) {
      word = (word << 8) | (k < n ? static_cast<unsigned char>(bytes[i + k]) : 0u);
    }
    for (size_t k = 0; k < 4; ++k) {
      out += k <= n ? digits[(word >> (18 - 6 * k)) & 63] : '=';
    }
  }
  return out;
}

}  // namespace gradlab::report
