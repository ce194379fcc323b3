/* The floor of any program that timestamps an event: on the same tracepoints as the empty floor, each program
 * reads the clock once (as every schedwatch sched program must) and does nothing else. */
#include "bpf/schedwatch.h"  /* relative to the checkout: the benchmark runs there */

TRACEPOINT_PROBE(sched, sched_switch) { bpf_ktime_get_ns(); return KEEP_EVENT; }
TRACEPOINT_PROBE(sched, sched_wakeup) { bpf_ktime_get_ns(); return KEEP_EVENT; }
TRACEPOINT_PROBE(sched, sched_wakeup_new) { bpf_ktime_get_ns(); return KEEP_EVENT; }
TRACEPOINT_PROBE(sched, sched_process_exit) { bpf_ktime_get_ns(); return KEEP_EVENT; }
