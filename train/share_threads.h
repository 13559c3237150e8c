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

}  // namespace gradlab::train
