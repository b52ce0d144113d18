#pragma once
// How many CPU threads a run uses, and how they wait, so that a run on a machine shared with other
// CPU-bound processes does not collapse.
//
// - Waiting: libgomp's default lets an idle thread spin for ~300k pause instructions (milliseconds)
//   before it sleeps. When another process holds a core, the spinning thread takes the CPU its
//   descheduled partner needs, and every parallel region waits a scheduler slice. Linking this file
//   bounds the spin (libgomp is shown a GOMP_SPINCOUNT when it starts) unless the user set
//   OMP_WAIT_POLICY or GOMP_SPINCOUNT; no spin at all would cost a futex wake-up per region.
// - Count: without --threads, the cores other processes left idle, sampled from /proc/stat at start.
#include <string>

namespace kvc {

// Largest thread count accepted: 4 × the hardware threads. More only makes each parallel region
// wait for threads the cores cannot run.
int max_threads();

// Why `threads` is not accepted, as one line without the option name ("" if it is).
std::string check_thread_count(int threads);

// The cores not busy with other processes (at least 1), measured over a short window at start.
int default_thread_count();

// Applies a thread count (0 = default_thread_count()) to LibTorch's OpenMP pool; throws kvc::Error
// with one line if the count is out of range. Returns the count used.
int set_threads(int threads);

}  // namespace kvc
