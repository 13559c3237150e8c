// Pieces of work one thread each (share_threads.h).
#include "train/share_threads.h"

#include <algorithm>
#include <exception>
#include <vector>

#include "autograd/kernels/elementwise.h"
#include "autograd/threads.h"
#include "nn/hooks.h"

namespace gradlab::train {

void run_pieces(int64_t count, const std::function<void(int64_t piece)>& piece) {
  const int available = threads();
  const int team = nn::hooks_running() ? 1 : static_cast<int>(std::min<int64_t>(available, count));
  if (team <= 1) {
    for (int64_t i = 0; i < count; ++i) piece(i);
    return;
  }
  const int threads_per_piece = std::max(1, available / team);
  // No exception may leave an OpenMP region: each piece's is kept and rethrown after it.
  std::vector<std::exception_ptr> errors(static_cast<size_t>(count));
#pragma omp parallel for num_threads(team) schedule(static, 1)
  for (int64_t i = 0; i < count; ++i) {
    set_threads(threads_per_piece);  // this thread's setting for this region only
    try {
      piece(i);
    } catch (...) {
      errors[static_cast<size_t>(i)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

void for_parameter_parts(int64_t elements, const std::function<void(int64_t part)>& part) {
  if (kernels::worth_threads(elements > kernels::kParallelThreshold)) {
    run_pieces(kParameterParts, part);
    return;
  }
  for (int64_t p = 0; p < kParameterParts; ++p) part(p);
}

}  // namespace gradlab::train
