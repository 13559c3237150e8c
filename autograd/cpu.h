// What vector instructions this build of gradlab runs, and what the processor offers: for
// `gradlab --version` and for reports that must say which path they measured.
#pragma once

#include <string>

namespace gradlab {

// The widest vector instructions the kernels were compiled for: "AVX-512", "AVX2" (with FMA),
// "AVX" or "SSE2", chosen at build time (GRADLAB_NATIVE, -march).
std::string compiled_isa();

// The same for the processor this process runs on (from CPUID).
std::string cpu_isa();

}  // namespace gradlab
