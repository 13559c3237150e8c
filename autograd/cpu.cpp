#include "autograd/cpu.h"

#include <cpuid.h>

#include <cstdlib>
#include <stdexcept>

namespace gradlab {

namespace {

// Each variant's names, in Isa's order.
struct IsaNames {
  Isa isa;
  const char* name;  // for people
  const char* key;   // for GRADLAB_ISA
};
constexpr IsaNames kAll[] = {{Isa::baseline, "SSE2", "baseline"},
                             {Isa::avx2, "AVX2", "avx2"},
                             {Isa::avx512, "AVX-512", "avx512"}};

// The x86-64-v3 features __builtin_cpu_supports does not name in every compiler: MOVBE and F16C
// (CPUID leaf 1, ECX bits 22 and 29) and LZCNT (leaf 0x80000001, ECX bit 5).
bool has_movbe_f16c_lzcnt() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool movbe_f16c = (ecx >> 22 & 1) && (ecx >> 29 & 1);
  if (!__get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx)) return false;
  return movbe_f16c && (ecx >> 5 & 1);
}

}  // namespace

std::string isa_name(Isa isa) {
  return kAll[static_cast<int>(isa)].name;
}

std::string isa_key(Isa isa) {
  return kAll[static_cast<int>(isa)].key;
}

// libgcc's CPUID reading also checks that the operating system saves the AVX and AVX-512
// registers (XGETBV), so a feature it reports can be used.
Isa processor_isa() {
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
                    has_movbe_f16c_lzcnt();
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                      __builtin_cpu_supports("avx512vl");
  if (avx2 && avx512) return Isa::avx512;
  return avx2 ? Isa::avx2 : Isa::baseline;
}

Isa choose_isa(const std::optional<std::string>& requested, Isa processor) {
  if (!requested || requested->empty()) return processor;
  for (const auto& [isa, name, key] : kAll) {
    if (*requested != key) continue;
    if (isa > processor) {
      throw std::runtime_error("GRADLAB_ISA=" + *requested + " asks for " + name +
                               ", which this processor does not have (it has " +
                               isa_name(processor) + "); unset GRADLAB_ISA or ask for less");
    }
    return isa;
  }
  throw std::runtime_error("GRADLAB_ISA=" + *requested +
                           " is not an instruction set gradlab has kernels for: use avx512, "
                           "avx2 or baseline, or unset it");
}

std::optional<std::string> requested_isa() {
  const char* value = std::getenv("GRADLAB_ISA");
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

Isa kernel_isa() {
  static const Isa isa = choose_isa(requested_isa(), processor_isa());
  return isa;
}

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

}  // namespace gradlab
