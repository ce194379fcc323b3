/* Shared definitions for schedwatch's BPF programs.
 *
 * The agent compiles each program with -D options for its map sizes and for
 * the tracepoints this kernel has (see agent/probes/). Programs read only
 * tracepoint fields and helpers, never kernel structs, so headers from a
 * nearby kernel version are enough to build them.
 */
#ifndef SCHEDWATCH_H
#define SCHEDWATCH_H

/* What every program returns on every path: when a tracepoint program returns 0 the kernel drops the event
 * for every perf user of that tracepoint (perf stat, perf record, perf sched), so schedwatch would blind them. */
#define KEEP_EVENT 1

/* Put right before the bounds check of a value used as an array index: keeps the compiler from folding the check
 * into an earlier test, or from reloading the value from the stack between the check and the access, so that the
 * verifier sees the check on the register used as the index (Linux 6.1's verifier does not carry a bound from one
 * copy of a value to another it reloads from the stack; later verifiers do). */
#define BOUND_BARRIER(x) asm volatile("" : "+r"(x))

/* Slots of the per-program `drops` array: events that could not be
 * accounted because a bounded map (or the announcement ring) was full.
 * Exported, never silent. */
enum drop_reason {
    DROP_CGROUP_MAP = 0,
    DROP_PROCESS_MAP = 1,
    DROP_THREAD_MAP = 2,
    DROP_ANNOUNCEMENT = 3,
    /* Slot 4 is each program's own last map: */
    DROP_SITE_MAP = 4,       /* call_sites (families) and samples (oncpu): a site or address not counted */
    DROP_NEIGHBOUR_MAP = 4,  /* neighbours (sched): a wait's holder workload not counted */
    DROP_REASONS = 5,
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

/* The key of the per-workload totals (the `cgroups` map of each program).
 *
 * Normally the task's cgroup2 id. With KEY_BY_PROCESS (hosts without cgroup2,
 * where every task is in the cgroup2 root) it is the process (tgid), and the
 * agent places each process by /proc/PID/cgroup. Each program then announces
 * a new key on its `new_processes` ring, so the agent reads /proc while the
 * process lives, and moves a dead process's entry to an exited key (flag,
 * exit time, tgid), so a new process reusing the pid starts from zero. Times
 * are boot-clock microseconds, /proc's clock for process start times, so the
 * agent can tell which of the processes that had one pid an exited key is.
 *
 * Map operations stay in each program's own file: bcc rewrites them only there.
 */
#ifdef KEY_BY_PROCESS
#define EXITED_KEY_FLAG (1ULL << 63)

static __always_inline u64 workload_key(void)
{
    return watched_tgid();
}

/* A new key, announced on the program's `new_processes` ring, with the
 * process that forked it and when (0: not seen, i.e. older than the agent,
 * forgotten, or sidecar mode). The parent's place is a child's that dies
 * unread; the fork time tells the agent whether the process now holding the
 * pid is the one announced, or a later one that reused the pid while the
 * announcement waited in the ring. */
struct announcement {
    u32 tgid;
    u32 parent;
    u64 boot_ns;
    u64 forked_ns;
};

/* A fork remembered until the child's first event (in `forked_by`, by the
 * child's tgid). New threads are remembered too (the tracepoint cannot tell
 * them apart) and age out of the LRU map. */
struct fork_record {
    u32 parent;
    u32 unused;
    u64 boot_ns;
};
#define FORKS_REMEMBERED 4096

/* The announcement of new key `tgid`, from its fork record if there is one. */
static __always_inline struct announcement announcement_of(u32 tgid, struct fork_record *fork)
{
    struct announcement news = {.tgid = tgid, .boot_ns = bpf_ktime_get_boot_ns()};
    if (fork) {
        news.parent = fork->parent;
        news.forked_ns = fork->boot_ns;
    }
    return news;
}

/* A process moved to another cgroup of the hierarchy the agent places
 * processes by (PLACE_HIERARCHY, an id of /proc/PID/cgroup), announced on the
 * same ring: its path as the kernel names it, path_len 0 when longer than
 * MOVE_PATH_MAX (the agent then reads /proc/PID/cgroup). */
#define MOVE_PATH_MAX 256
struct move_announcement {
    u32 tgid;
    u32 path_len;  /* with the terminating NUL */
    u64 boot_ns;
    char path[MOVE_PATH_MAX];
};

static __always_inline u64 exited_key(u32 tgid)
{
    return EXITED_KEY_FLAG | (((bpf_ktime_get_boot_ns() / 1000) & 0x7fffffffULL) << 32) | tgid;
}
#else
static __always_inline u64 workload_key(void)
{
    return bpf_get_current_cgroup_id();
}
#endif

#endif
