// The table of one variant: compiled with the rest of kernels/*.cpp under one instruction set's
// flags, GRADLAB_KERNEL_VARIANT naming it (variants.h).
#include "autograd/kernels/variants.h"

// The one symbol of the variant's object that stays global.
extern "C" const gradlab::kernels::KernelVariant GRADLAB_KERNEL_VARIANT{
    gradlab::kernels::entry_points<float>(), gradlab::kernels::entry_points<double>()};
