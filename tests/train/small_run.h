// A copy-task run small enough for a test to train many steps of in a second, shared by the
// tests of the training loop.
#pragma once

#include "train/config.h"

namespace gradlab::testing {

inline train::RunConfig small_run_config() {
  train::RunConfig c;
  c.task.sequence.length = 4;
  c.net.d_model = 32;
  c.net.feed_forward.d_ff = 64;
  c.batch_size = 16;
  c.eval_size = 64;
  train::finalize(c);
  return c;
}

}  // namespace gradlab::testing
