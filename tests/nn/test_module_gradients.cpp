// Every registered module (layers, attention variants, blocks, whole models) passes its float64
// gradient check with respect to its inputs and every parameter.
#include <gtest/gtest.h>

#include "nn/module_checks.h"

namespace gradlab::nn {

void PrintTo(const ModuleCheck& check, std::ostream* out) {
  *out << check.name;
}

namespace test_module_gradients {

class ModuleGradient : public ::testing::TestWithParam<ModuleCheck> {};

TEST_P(ModuleGradient, MatchesCentralDifferences) {
  const ModuleCheck& check = GetParam();
  const GradcheckReport report = check.run(0);
  EXPECT_TRUE(report.passed()) << check.name << ": " << describe(report);
  EXPECT_GE(report.inputs.size(), 1u);  // something was checked
}

std::string test_name(const ::testing::TestParamInfo<ModuleCheck>& info) {
  std::string name;
  for (char c : info.param.name) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(AllModules, ModuleGradient, ::testing::ValuesIn(module_checks()),
                         test_name);

}  // namespace test_module_gradients
}  // namespace gradlab::nn
