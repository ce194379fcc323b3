/* Shared definitions for schedwatch's BPF programs.
 *
 * The agent compiles each program with -D options for its map sizes and for
 * the tracepoints this kernel has (see agent/probes/). Programs read only
 * tracepoint fields and helpers, never kernel structs, so headers from a
 * nearby kernel version are enough to build them.
 */
#ifndef SCHEDWATCH_H
#define SCHEDWATCH_H

/* Slots of the per-program `drops` array: events that could not be
 * accounted because a bounded map was full. Exported, never silent. */
enum drop_reason {
    DROP_CGROUP_MAP = 0,
    DROP_PROCESS_MAP = 1,
    DROP_THREAD_MAP = 2,
    DROP_REASONS = 3,
};

#endif
