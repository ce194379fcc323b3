/* The floor of a program that times system calls: on the same raw tracepoints as the empty floor, each program
 * reads the clock once (as timing a call must, at entry and at return) and does nothing else. */
#include "bpf/schedwatch.h"  /* relative to the checkout: the benchmark runs there */

RAW_TRACEPOINT_PROBE(sys_enter) { bpf_ktime_get_ns(); return KEEP_EVENT; }
RAW_TRACEPOINT_PROBE(sys_exit) { bpf_ktime_get_ns(); return KEEP_EVENT; }
