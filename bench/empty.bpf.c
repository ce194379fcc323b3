/* The floor: empty programs on exactly the tracepoints schedwatch's syscalls probe uses. */
TRACEPOINT_PROBE(syscalls, sys_enter_sched_yield) { return 0; }
TRACEPOINT_PROBE(syscalls, sys_enter_futex) { return 0; }
TRACEPOINT_PROBE(syscalls, sys_exit_futex) { return 0; }
TRACEPOINT_PROBE(sched, sched_process_exit) { return 0; }
#ifdef HAVE_FUTEX2
TRACEPOINT_PROBE(syscalls, sys_enter_futex_waitv) { return 0; }
TRACEPOINT_PROBE(syscalls, sys_exit_futex_waitv) { return 0; }
TRACEPOINT_PROBE(syscalls, sys_enter_futex_wait) { return 0; }
TRACEPOINT_PROBE(syscalls, sys_exit_futex_wait) { return 0; }
TRACEPOINT_PROBE(syscalls, sys_enter_futex_wake) { return 0; }
TRACEPOINT_PROBE(syscalls, sys_enter_futex_requeue) { return 0; }
#endif
