// The kernels' variants, one per instruction set. Every kernels/*.cpp is compiled once for each
// Isa (autograd/CMakeLists.txt: -march=x86-64, x86-64-v3, x86-64-v4 -mprfchw) and linked into
// one object per variant in which every symbol but that variant's table is made local, so that
// no code compiled for one instruction set (not even an inlined std:: or Eigen function) can
// stand in for another's. The entry points the kernel headers declare are defined in
// dispatch.cpp as calls through the table of kernel_isa()'s variant. Internal to autograd/ (and
// its tests, which compare the variants).
#pragma once

#include <type_traits>

#include "autograd/cpu.h"
#include "autograd/kernels/attention.h"
#include "autograd/kernels/attention_lanes.h"
#include "autograd/kernels/attention_tiles.h"
#include "autograd/kernels/gelu.h"
#include "autograd/kernels/gemm.h"
#include "autograd/kernels/layer_norm.h"
#include "autograd/kernels/optimizer.h"
#include "autograd/kernels/softmax.h"

namespace gradlab::kernels {

// One variant's kernels for element type T, each at the type of its entry point.
template <class T>
struct KernelTable {
  decltype(&kernels::gemm<T>) gemm;
  decltype(&kernels::attention_forward<T>) attention_forward;
  decltype(&kernels::attention_backward<T>) attention_backward;
  decltype(&kernels::attention_lanes_fit<T>) attention_lanes_fit;
  decltype(&kernels::attention_lanes_saved_size<T>) attention_lanes_saved_size;
  decltype(&kernels::attention_lanes_forward<T>) attention_lanes_forward;
  decltype(&kernels::attention_lanes_backward<T>) attention_lanes_backward;
  decltype(&kernels::attention_tiles_forward<T>) attention_tiles_forward;
  decltype(&kernels::attention_tiles_backward<T>) attention_tiles_backward;
  decltype(&kernels::gelu_forward<T>) gelu_forward;
  decltype(&kernels::gelu_backward<T>) gelu_backward;
  decltype(&kernels::layer_norm_forward<T>) layer_norm_forward;
  decltype(&kernels::layer_norm_backward<T>) layer_norm_backward;
  decltype(&kernels::softmax_rows_forward<T>) softmax_rows_forward;
  decltype(&kernels::softmax_rows_backward<T>) softmax_rows_backward;
  decltype(&kernels::log_softmax_rows_forward<T>) log_softmax_rows_forward;
  decltype(&kernels::log_softmax_rows_backward<T>) log_softmax_rows_backward;
  decltype(&kernels::cross_entropy_forward<T>) cross_entropy_forward;
  decltype(&kernels::cross_entropy_backward<T>) cross_entropy_backward;
  decltype(&kernels::sgd_update<T>) sgd_update;
  decltype(&kernels::adam_update<T>) adam_update;
};

struct KernelVariant {
  KernelTable<float> f32;
  KernelTable<double> f64;
  decltype(&kernels::attention_tiles_fit) attention_tiles_fit;

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
  return {&gemm<T>,
          &attention_forward<T>,
          &attention_backward<T>,
          &attention_lanes_fit<T>,
          &attention_lanes_saved_size<T>,
          &attention_lanes_forward<T>,
          &attention_lanes_backward<T>,
          &attention_tiles_forward<T>,
          &attention_tiles_backward<T>,
          &gelu_forward<T>,
          &gelu_backward<T>,
          &layer_norm_forward<T>,
          &layer_norm_backward<T>,
          &softmax_rows_forward<T>,
          &softmax_rows_backward<T>,
          &log_softmax_rows_forward<T>,
          &log_softmax_rows_backward<T>,
          &cross_entropy_forward<T>,
          &cross_entropy_backward<T>,
          &sgd_update<T>,
          &adam_update<T>};
}

// The variant for `isa`, or null when this processor cannot run it.
const KernelVariant* kernel_variant(Isa isa);

// The variant of kernel_isa(), which the entry points call.
const KernelVariant& active_kernels();

}  // namespace gradlab::kernels
