// The gradlab subcommands. Each takes the arguments after its name and returns the process exit
// code: 0 success, 1 runtime failure, 2 usage error (after printing the reason and usage).
#pragma once

#include <string>
#include <vector>

namespace gradlab::train {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

int run_gradcheck(const std::vector<std::string>& args);
int run_explain(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_predict(const std::vector<std::string>& args);
int run_attention(const std::vector<std::string>& args);
int run_inspect(const std::vector<std::string>& args);

}  // namespace gradlab::train
