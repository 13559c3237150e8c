// How many threads gradlab's ops run on, and how idle threads wait. A program starts on one
// thread, as the gradlab tool does (its --threads defaults to 1): a run's speed-up from a second
// thread is small beside the CPU time a machine's other work loses to it. OMP_NUM_THREADS, when
// set, decides instead; set_threads changes it at any time.
#pragma once

namespace gradlab {

// The OpenMP threads every op and kernel called from this thread uses from now on (at least 1):
// OpenMP keeps the setting per thread, so a std::thread of the program's starts from the
// default (one, or OMP_NUM_THREADS) and sets its own.
void set_threads(int count);

// The threads the ops use now.
int threads();

// Makes idle OpenMP threads sleep between parallel regions instead of spinning, after a short
// spin; call it first in main(), before any other work, in a program that sets more than one
// thread. (At one thread no thread is ever idle.)
//
// libgomp's idle threads spin for a while after every parallel region (300,000 rounds by
// default, milliseconds). On a machine whose CPUs are shared (virtual CPUs, other work), the
// spinning takes CPU time from the thread that is still working: the default copy model's
// training step measured 2-3x slower at 2 threads than at 1. Sleeping at once has its own cost
// there: waking a sleeping thread took 40-50 us per parallel region. A short spin (kIdleSpinCount
// rounds, well under a millisecond) keeps a thread awake across the short gaps between regions
// and lets it sleep through long ones, which a 2-thread training step gains from.
//
// libgomp reads these settings once, from OMP_WAIT_POLICY and GOMP_SPINCOUNT, before main()
// runs; so when OMP_WAIT_POLICY is unset, this sets it to PASSIVE (and GOMP_SPINCOUNT, unless
// set) and re-executes the program (/proc/self/exe, same arguments). It returns when the
// variable was already set (by the user, who keeps the last word, or by the re-execution) or
// when the re-execution could not happen, in which case the program simply runs with libgomp's
// default.
void make_idle_threads_sleep(char** argv);

// GOMP_SPINCOUNT's value above: rounds of a pause instruction, well under a millisecond here.
inline constexpr const char* kIdleSpinCount = "10000";

}  // namespace gradlab
