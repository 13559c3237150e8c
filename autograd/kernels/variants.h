// The kernels' variants, one per instruction set. Every kernels/*.cpp is compiled once for each
// Isa (autograd/CMakeLists.txt: -march=x86-64, x86-64-v3, x86-64-v4 -mprfchw) and linked into
// one object per variant in which every symbol but that variant's table is made local, so that
// no code compiled for one instruction set (not even an inlined std:: or Eigen function) can
// stand in for another's. The entry points the kernel headers declare are defined in
// dispatch.cpp as calls through the table of kernel_isa()'s variant; the table, those
// definitions and the instantiations all come from the one list in kernel_list.h. Internal to
// autograd/ (and its tests, which compare the variants).
#pragma once

#include <type_traits>

#include "autograd/cpu.h"
#include "autograd/kernels/kernel_list.h"

namespace gradlab::kernels {

// One variant's kernels for element type T, a member per row of kernel_list.h, each at the type
// of its entry point.
template <class T>
struct KernelTable {
#define GRADLAB_TABLE_MEMBER(result, name, parameters, arguments) decltype(&kernels::name<T>) name;
  GRADLAB_KERNELS(GRADLAB_TABLE_MEMBER)
#undef GRADLAB_TABLE_MEMBER
};

struct KernelVariant {
  KernelTable<float> f32;
  KernelTable<double> f64;

  template <class T>
  const KernelTable<T>& of() const {
    if constexpr (std::is_same_v<T, float>) {
      return f32;
    } else {
      return f64;
    }
  }
};

// This object's definitions of the entry points, for the table of a variant (variant.cpp).
template <class T>
constexpr KernelTable<T> entry_points() {
#define GRADLAB_TABLE_ENTRY(result, name, parameters, arguments) .name = &kernels::name<T>,
  return {GRADLAB_KERNELS(GRADLAB_TABLE_ENTRY)};
#undef GRADLAB_TABLE_ENTRY
}

// The variant for `isa`, or null when this processor cannot run it.
const KernelVariant* kernel_variant(Isa isa);

// The variant of kernel_isa(), which the entry points call.
const KernelVariant& active_kernels();

}  // namespace gradlab::kernels
