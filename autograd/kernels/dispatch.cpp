// The kernels' entry points (declared in the kernel headers): each calls the variant of this
// process's instruction set (variants.h). Compiled once, outside the variants.
#include "autograd/kernels/variants.h"

extern "C" const gradlab::kernels::KernelVariant gradlab_kernels_baseline, gradlab_kernels_avx2,
    gradlab_kernels_avx512;

namespace gradlab::kernels {

const KernelVariant* kernel_variant(Isa isa) {
  if (isa > processor_isa()) return nullptr;
  switch (isa) {
    case Isa::avx512:
      return &gradlab_kernels_avx512;
    case Isa::avx2:
      return &gradlab_kernels_avx2;
    case Isa::baseline:
      break;
  }
  return &gradlab_kernels_baseline;
}

const KernelVariant& active_kernels() {
  static const KernelVariant& variant = *kernel_variant(kernel_isa());
  return variant;
}

namespace {

template <class T>
const KernelTable<T>& active() {
  return active_kernels().of<T>();
}

}  // namespace

// Each row of kernel_list.h as
//   template <class T>
//   result name(parameters) { return active<T>().name(arguments); }
#define GRADLAB_ENTRY_POINT(result, name, parameters, arguments) \
  template <class T>                                             \
  result name parameters {                                       \
    return active<T>().name arguments;                           \
  }
GRADLAB_KERNELS(GRADLAB_ENTRY_POINT)
#undef GRADLAB_ENTRY_POINT

GRADLAB_KERNELS(GRADLAB_INSTANTIATE_KERNEL)

}  // namespace gradlab::kernels
