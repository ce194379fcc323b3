/* The floor of any program on every system call: empty raw tracepoint programs on raw_syscalls' sys_enter and
 * sys_exit (what bpf/families.bpf.c attaches to), returning what its programs return. */
#include "bpf/schedwatch.h"  /* relative to the checkout: the benchmark runs there */

RAW_TRACEPOINT_PROBE(sys_enter) { return KEEP_EVENT; }
RAW_TRACEPOINT_PROBE(sys_exit) { return KEEP_EVENT; }
