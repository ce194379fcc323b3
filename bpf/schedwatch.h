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

/* Sidecar mode (PIDNS_DEV/PIDNS_INO set by the agent): only tasks of the agent's
 * own pid namespace are watched, and processes are keyed by their pid there. */
#ifdef PIDNS_INO
static __always_inline u32 watched_tgid(void)
{
    struct bpf_pidns_info ns = {};
    if (bpf_get_ns_current_pid_tgid(PIDNS_DEV, PIDNS_INO, &ns, sizeof(ns)))
        return 0;  /* not in the watched namespace */
    return ns.tgid;
}
#define WATCHED() (watched_tgid() != 0)
#else
static __always_inline u32 watched_tgid(void)
{
    return bpf_get_current_pid_tgid() >> 32;
}
#define WATCHED() (1)
#endif

#endif
