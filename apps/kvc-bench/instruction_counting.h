#pragma once
// Brackets the timed decode steps for callgrind, whose instruction counts repeat on a loaded machine
// where timings do not: under
//   valgrind --tool=callgrind --instr-atstart=no build/bin/kvc-bench -m MODEL --contexts N ...
// only those steps are counted (the prefill runs uninstrumented, and the machine's limits are measured
// on token sizes: under valgrind they would take many minutes and mean nothing). The macros do
// nothing outside valgrind, or where its headers are missing.
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define KVC_COUNT_INSTRUCTIONS_START() CALLGRIND_START_INSTRUMENTATION
#define KVC_COUNT_INSTRUCTIONS_STOP() CALLGRIND_STOP_INSTRUMENTATION
#define KVC_UNDER_VALGRIND() (RUNNING_ON_VALGRIND != 0)
#else
#define KVC_COUNT_INSTRUCTIONS_START() ((void)0)
#define KVC_COUNT_INSTRUCTIONS_STOP() ((void)0)
#define KVC_UNDER_VALGRIND() false
#endif
