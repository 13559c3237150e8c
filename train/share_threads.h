// Independent pieces of work (a batch's shares, an evaluation's chunks of rows) run side by side,
// one thread each, instead of one piece after another with every op split across the threads:
// one parallel region for all the pieces, not one per op.
#pragma once

#include <cstdint>
#include <functional>

namespace gradlab::train {

// Calls piece(0), ..., piece(count - 1), on up to threads() threads at once (set_threads), each
// piece's ops on threads() / (that number) threads. Every piece must write only its own results:
// a piece's numbers are the same whichever thread runs it, and the caller combines them in piece
// order. The first exception a piece throws is rethrown once all have run. With hooks running on
// the calling thread (nn::hooks_running: they apply on that thread alone), the pieces run there,
// in order.
void run_pieces(int64_t count, const std::function<void(int64_t piece)>& piece);

// After the shares, a step's loops over every parameter's elements (the gradients' sum, their
// norm, clipping, the optimizer's update) split each parameter alike: part p of kParameterParts
// is its elements [n p / parts, n (p + 1) / parts), run as piece p. Thread p thus finds its part
// of every gradient, parameter and optimizer state in its own cache, where its last loop left
// it; and the number of parts is fixed, so that the norm adds its partial sums in the same order
// on any number of threads.
inline constexpr int64_t kParameterParts = 2;

struct ElementRange {
  int64_t begin, end;
};

inline ElementRange parameter_part(int64_t n, int64_t part) {
  return {n * part / kParameterParts, n * (part + 1) / kParameterParts};
}

// part(0), ..., part(kParameterParts - 1) as run_pieces, but on the calling thread alone when the
// parameters hold `elements` in all, too few for a second thread to pay (kParallelThreshold).
void for_parameter_parts(int64_t elements, const std::function<void(int64_t part)>& part);

}  // namespace gradlab::train
