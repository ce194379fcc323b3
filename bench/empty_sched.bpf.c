/* The floor: empty programs on exactly the tracepoints schedwatch's sched probe uses. */
TRACEPOINT_PROBE(sched, sched_switch) { return 0; }
TRACEPOINT_PROBE(sched, sched_wakeup) { return 0; }
TRACEPOINT_PROBE(sched, sched_wakeup_new) { return 0; }
TRACEPOINT_PROBE(sched, sched_process_exit) { return 0; }
