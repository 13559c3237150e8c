// A corpus replay without libFuzzer: calls a fuzz target's LLVMFuzzerTestOneInput once on each
// file named on the command line. The sanitizer build (g++) links it with the harnesses, so the
// committed corpus is replayed under AddressSanitizer and UndefinedBehaviorSanitizer without a
// clang build of its own. What libFuzzer's replay reports, this reports too: a crash or a
// sanitizer report ends the process, and an input that runs past the time limit is a hang.
// (Allocation limits come from ASAN_OPTIONS=max_allocation_size_mb, set by scripts/test.sh.)
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Defined by the targets that need a set-up (fuzz_cli's working directory).
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

// scripts/fuzz.sh gives libFuzzer -timeout=20.
constexpr unsigned kTimeoutSeconds = 20;
const char* current_input = "";

void on_timeout(int) {
  const char* parts[] = {"replay: timeout: ", current_input, " ran longer than 20 s\n"};
  for (const char* part : parts) {
    if (::write(STDERR_FILENO, part, std::strlen(part)) < 0) break;
  }
  ::_exit(70);
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::signal(SIGALRM, on_timeout);
  for (int i = 1; i < argc; ++i) {
    // An exact-size copy, as libFuzzer passes it, so that reading one byte past the input is a
    // heap overflow the sanitizer reports.
    std::error_code error;
    const auto size = static_cast<size_t>(std::filesystem::file_size(argv[i], error));
    const auto input = std::make_unique<uint8_t[]>(error ? 0 : size);
    std::ifstream in(argv[i], std::ios::binary);
    if (error ||
        !in.read(reinterpret_cast<char*>(input.get()), static_cast<std::streamsize>(size))) {
      std::fprintf(stderr, "replay: cannot read %s\n", argv[i]);
      return 1;
    }
    current_input = argv[i];
    ::alarm(kTimeoutSeconds);
    LLVMFuzzerTestOneInput(input.get(), size);
    ::alarm(0);
  }
  std::printf("replay: %d inputs passed\n", argc - 1);
  return 0;
}
