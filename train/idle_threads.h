// How OpenMP's idle threads wait: a process-wide choice that must be made before main().
#pragma once

namespace gradlab::train {

// Makes idle OpenMP threads sleep between parallel regions instead of spinning.
//
// libgomp's idle threads spin for a while after every parallel region. On a machine whose CPUs
// are shared (virtual CPUs, other work), the spinning takes CPU time from the thread that is
// still working: the default copy model's training step measured 2-3x slower at 2 threads than
// at 1. libgomp reads its wait policy once, from OMP_WAIT_POLICY, before main() runs; so when
// the variable is unset, this sets it to PASSIVE and re-executes the program (/proc/self/exe,
// same arguments). It returns when the variable was already set (by the user, who keeps the
// last word, or by the re-execution) or when the re-execution could not happen, in which case
// the program simply runs with libgomp's default.
void make_idle_threads_sleep(char** argv);

}  // namespace gradlab::train
