/* The floor: empty programs on exactly the tracepoints schedwatch's syscalls probe uses, returning what its
 * programs return. */
#include "bpf/schedwatch.h"  /* relative to the checkout: the benchmark runs there */

TRACEPOINT_PROBE(syscalls, sys_enter_sched_yield) { return KEEP_EVENT; }
TRACEPOINT_PROBE(syscalls, sys_enter_futex) { return KEEP_EVENT; }
TRACEPOINT_PROBE(syscalls, sys_exit_futex) { return KEEP_EVENT; }
TRACEPOINT_PROBE(sched, sched_process_exit) { return KEEP_EVENT; }
#ifdef HAVE_FUTEX2
TRACEPOINT_PROBE(syscalls, sys_enter_futex_waitv) { return KEEP_EVENT; }
TRACEPOINT_PROBE(syscalls, sys_exit_futex_waitv) { return KEEP_EVENT; }
TRACEPOINT_PROBE(syscalls, sys_enter_futex_wait) { return KEEP_EVENT; }
TRACEPOINT_PROBE(syscalls, sys_exit_futex_wait) { return KEEP_EVENT; }
TRACEPOINT_PROBE(syscalls, sys_enter_futex_wake) { return KEEP_EVENT; }
TRACEPOINT_PROBE(syscalls, sys_enter_futex_requeue) { return KEEP_EVENT; }
#endif
