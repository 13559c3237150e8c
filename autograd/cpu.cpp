#include "autograd/cpu.h"

namespace gradlab {

std::string compiled_isa() {
#if defined(__AVX512F__)
  return "AVX-512";
#elif defined(__AVX2__) && defined(__FMA__)
  return "AVX2";
#elif defined(__AVX__)
  return "AVX";
#else
  return "SSE2";
#endif
}

std::string cpu_isa() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "AVX-512";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "AVX2";
  if (__builtin_cpu_supports("avx")) return "AVX";
  return "SSE2";
}

}  // namespace gradlab
