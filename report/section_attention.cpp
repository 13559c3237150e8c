// The report's attention patterns: every hook_pattern point of the model on the report's prompt,
// [H, Tq, Tk] per point as base64 float32, with the tokens of its queries and keys.
#include "nn/hooks.h"
#include "nn/module.h"
#include "report/sections.h"

namespace gradlab::report {

SectionResult collect_attention(ReportRun& run) {
  const ReportPrompt* prompt = run.prompt();
  if (!prompt) return {nullptr, "not computed: the report was made without a prompt"};
  nn::SequenceModel& model = *run.trained().model;
  nn::ActivationCache cache;
  {
    nn::EvalScope eval(model);
    NoGradGuard no_grad;
    cache = nn::run_with_cache(model, prompt->batch, "*hook_pattern", {.logits = false});
  }
  nlohmann::json points = nlohmann::json::array();
  for (const std::string& name : cache.names()) {
    const Tensor& pattern = cache.at(name);  // [1, H, Tq, Tk]
    const Shape& shape = pattern.shape();
    // The encoder reads the source; cross-attention's keys are the encoder's.
    const bool encoder = name.rfind("encoder.", 0) == 0;
    const bool cross = name.find("cross") != std::string::npos;
    const std::vector<double> values = pattern.to_vector();
    points.push_back({{"name", name},
                      {"heads", shape.at(1)},
                      {"queries", encoder ? "source" : "inputs"},
                      {"keys", encoder || cross ? "source" : "inputs"},
                      {"shape", {shape.at(1), shape.at(2), shape.at(3)}},
                      {"pattern", base64_floats({values.begin(), values.end()})}});
  }
  return {{{"origin", prompt->origin},
           {"tokens", {{"inputs", prompt->input_tokens}, {"source", prompt->source_tokens}}},
           {"points", points}},
          ""};
}

}  // namespace gradlab::report
