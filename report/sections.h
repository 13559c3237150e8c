// The report's table of sections. A section is a function that collects part of a run's data as
// JSON, drawn in the page by the renderer of the same id (report/web/sections/<id>.js). Adding a
// section is a file (section_<id>.cpp with its collect function, and its renderer) and a row in
// sections.cpp; docs/report.md walks through one.
#pragma once

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "nn/sequence_model.h"
#include "train/trained_model.h"
#include "train/trainer.h"

namespace gradlab::report {

// The prompt the per-prompt sections read (attention, logit lens, DLA): one sequence, teacher
// forced, and how to show its tokens.
struct ReportPrompt {
  nn::SequenceBatch batch;                 // [1, T] (and [1, S] source)
  std::vector<std::string> input_tokens;   // [T]: what each input position reads, as text
  std::vector<std::string> source_tokens;  // [S]: the encoder's, for an encoder-decoder
  std::string origin;                      // "held-out row 0", "--prompt"
};

// What the sections read: the run directory and, loaded once on first use, its best
// checkpoint's model and a scorer of its held-out set.
class ReportRun {
 public:
  ReportRun(std::string run_dir, std::optional<ReportPrompt> prompt);

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& file) const;  // dir/file
  bool has(const std::string& file) const;          // dir/file exists
  // The best checkpoint's model; throws CheckpointError when the run has none.
  train::TrainedModel& trained();
  // Scores the held-out set (train::scoring_trainer); throws ConfigError for a program's own data.
  train::Trainer& scorer();
  const ReportPrompt* prompt() const { return prompt_ ? &*prompt_ : nullptr; }
  // A token id as the page shows it: a language model's text, else the id.
  std::string token_text(int64_t token);

 private:
  std::string dir_;
  std::optional<ReportPrompt> prompt_;
  std::optional<train::TrainedModel> trained_;
  std::unique_ptr<train::Trainer> scorer_;
};

// What a section gives: its data, or why there is none and the command that would make it; both
// empty when the section does not apply to the run (Fourier for a copy run), which leaves it out.
struct SectionResult {
  nlohmann::json data;  // null when missing
  std::string missing;  // "not computed: run gradlab patch ..."
};

struct Section {
  std::string id;     // the renderer's name in report/web/sections/<id>.js
  std::string title;  // the page's heading
  // Cheap enough to collect at each evaluation of a live run (train --report).
  bool live = false;
  std::function<SectionResult(ReportRun&)> collect;
};

// Every section, in page order.
const std::vector<Section>& sections();

// The report's document: {"title", "run", "live", "sections": [{id, title, data | missing}]}.
// A live report collects only the live sections and lists the others as computed when the run
// ends. A section that throws is listed as missing with the error's message.
nlohmann::json collect_report(ReportRun& run, bool live);

// The sections' collect functions (section_<id>.cpp).
SectionResult collect_model_card(ReportRun& run);
SectionResult collect_curves(ReportRun& run);
SectionResult collect_attention(ReportRun& run);
SectionResult collect_head_scores(ReportRun& run);
SectionResult collect_ablation(ReportRun& run);
SectionResult collect_patching(ReportRun& run);
SectionResult collect_logit_lens(ReportRun& run);
SectionResult collect_dla(ReportRun& run);
SectionResult collect_fourier(ReportRun& run);

// Shared by the sections: float32 values as base64 (little-endian), the page's compact form of
// a big array; decoded by GL.floats in report/web/core.js.
std::string base64_floats(const std::vector<float>& values);

// A CSV file of a run (metrics.csv, fourier.csv) as {column: [values]}, a row per line, each
// cell a number or null (empty, cut short by a kill while written, or not one number); null
// when the file is missing or has no header.
nlohmann::json csv_columns(const std::string& path);

}  // namespace gradlab::report
