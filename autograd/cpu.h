// Which vector instructions gradlab's kernels run. The kernels (autograd/kernels/) are compiled
// once per instruction set and the variant is chosen when the process first needs one, from the
// processor's CPUID, so that one binary is fast on every x86-64 machine; the environment
// variable GRADLAB_ISA (avx512, avx2 or baseline) forces a lower one, to test or compare them.
#pragma once

#include <optional>
#include <string>

namespace gradlab {

// Ordered: each includes the ones before it.
enum class Isa {
  baseline,  // x86-64: SSE2, 16-byte vectors; runs on every x86-64 processor
  avx2,      // x86-64-v3: AVX2 with FMA, 32-byte vectors
  avx512,    // x86-64-v4 and PREFETCHW: AVX-512 F, BW, CD, DQ and VL, 64-byte vectors
};

// "SSE2", "AVX2", "AVX-512": for people.
std::string isa_name(Isa isa);

// "baseline", "avx2", "avx512": the values of GRADLAB_ISA.
std::string isa_key(Isa isa);

// The widest variant this processor (and its operating system) can run, from CPUID.
Isa processor_isa();

// The variant for a processor that can run `processor`, given GRADLAB_ISA's value `requested`
// (none when unset or empty). Throws std::runtime_error naming the variable for a value that is
// not a key above, or one the processor cannot run.
Isa choose_isa(const std::optional<std::string>& requested, Isa processor);

// The variant this process runs: choose_isa from GRADLAB_ISA and processor_isa(), read once.
Isa kernel_isa();

// GRADLAB_ISA's value when it is set (not empty), for reports that must say a run was forced.
std::optional<std::string> requested_isa();

// The widest vector instructions the code outside the kernels was compiled for: "AVX-512",
// "AVX2" (with FMA), "AVX" or "SSE2", chosen at build time (GRADLAB_NATIVE, -march). Only
// loops the compiler vectorises by itself (elementwise ops, the optimizer) depend on it.
std::string compiled_isa();

}  // namespace gradlab
