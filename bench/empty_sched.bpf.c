/* The floor: empty programs on exactly the tracepoints schedwatch's sched probe uses, returning what its
 * programs return. */
#include "bpf/schedwatch.h"  /* relative to the checkout: the benchmark runs there */

TRACEPOINT_PROBE(sched, sched_switch) { return KEEP_EVENT; }
TRACEPOINT_PROBE(sched, sched_wakeup) { return KEEP_EVENT; }
TRACEPOINT_PROBE(sched, sched_wakeup_new) { return KEEP_EVENT; }
TRACEPOINT_PROBE(sched, sched_process_exit) { return KEEP_EVENT; }
