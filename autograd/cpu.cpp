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

// Bit `bit` of ECX of CPUID leaf `leaf`, for the features __builtin_cpu_supports does not name in
// every compiler.
bool cpuid_ecx_bit(unsigned leaf, int bit) {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(leaf, &eax, &ebx, &ecx, &edx) && (ecx >> bit & 1);
}

// x86-64-v3's MOVBE and F16C (leaf 1, bits 22 and 29) and LZCNT (leaf 0x80000001, bit 5).
bool has_movbe_f16c_lzcnt() {
  return cpuid_ecx_bit(1, 22) && cpuid_ecx_bit(1, 29) && cpuid_ecx_bit(0x80000001, 5);
}

// PREFETCHW (leaf 0x80000001, bit 8), which the AVX-512 variant is compiled with.
bool has_prefetchw() {
  return cpuid_ecx_bit(0x80000001, 8);
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
                      __builtin_cpu_supports("avx512vl") && has_prefetchw();
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
