/* Shared definitions for schedwatch's BPF programs, and the process lifecycle they share.
 *
 * The agent compiles each program with -D options for its map sizes and for
 * the tracepoints this kernel has (see agent/bpf/probes/). Programs read only
 * tracepoint fields and helpers, never kernel structs, so headers from a
 * nearby kernel version are enough to build them.
 *
 * bcc rewrites map operations (map.lookup(), ...) only in the program's own
 * file, so the agent's compiler (agent/bpf/compile.py) puts this header's
 * text in place of the program's `#include "schedwatch.h"` line: the map
 * operations below are then the program's own. Included the usual way (the
 * benchmarks' floors), only the definitions without maps are used.
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
 * The lifecycle at the end of this header does both for every program.
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

#if defined(WORKLOAD_TOTALS) || defined(COUNT_DROPS)
/* Events that could not be accounted, by enum drop_reason (the agent exports them). */
BPF_ARRAY(drops, u64, DROP_REASONS);

static __always_inline void count_drop(int reason)
{
    u64 *slot = drops.lookup(&reason);
    if (slot)
        __sync_fetch_and_add(slot, 1);
}
#endif

#ifdef WORKLOAD_TOTALS
/* The process lifecycle, written once for every program that keeps per-workload totals. A program defines
 * WORKLOAD_TOTALS (the type of its `cgroups` map's values), declares that map, includes this header, and defines
 * the two hooks declared here; each program stays loadable alone, with its own copy of these maps and handlers.
 *
 *   workload_entry(key)  the totals of workload `key`, created if new (keyed by process: announced to the agent
 *                        with the process that forked it); NULL, counted in drops, when the map is full.
 *   sched_process_exit   every thread's exit goes to forget_thread(); a process's last one to process_exits(),
 *                        then (keyed by process) its totals move to an exited key.
 *   sched_process_fork   keyed by process: who forked each new task, until its first event announces it.
 *   cgroup_attach_task   with HAVE_CGROUP_ATTACH: counts moves in `cgroup_moves` (the sched program's cached
 *                        keys are read again after one); keyed by process: announces the move with its path.
 */
static __always_inline void forget_thread(u32 tid);   /* thread `tid` exits: drop what the program keeps for it */
static __always_inline void process_exits(u32 tgid);  /* the last thread of process `tgid` exits (a watched one) */

#ifdef KEY_BY_PROCESS
BPF_RINGBUF_OUTPUT(new_processes, 64);
BPF_TABLE("lru_hash", u32, struct fork_record, forked_by, FORKS_REMEMBERED);
#endif
#ifdef HAVE_CGROUP_ATTACH
/* Tasks moved to another cgroup since the program was loaded. bcc attaches programs in the order of their names:
 * cgroup_attach_task counts before sched_switch reads a first key, so no move goes uncounted. */
BPF_ARRAY(cgroup_moves, u64, 1);
#endif

static __always_inline WORKLOAD_TOTALS *workload_entry(u64 key)
{
    WORKLOAD_TOTALS *stats = cgroups.lookup(&key);
    if (stats)
        return stats;
    WORKLOAD_TOTALS zero = {};
    if (cgroups.insert(&key, &zero) == 0) {
#ifdef KEY_BY_PROCESS
        u32 tgid = key;
        struct fork_record *fork = forked_by.lookup(&tgid);
        struct announcement news = announcement_of(tgid, fork);
        if (fork)
            forked_by.delete(&tgid);
        if (new_processes.ringbuf_output(&news, sizeof(news), 0))
            count_drop(DROP_ANNOUNCEMENT);
#endif
    }
    stats = cgroups.lookup(&key);  /* inserted here, or by another CPU in between */
    if (!stats)
        count_drop(DROP_CGROUP_MAP);
    return stats;
}

TRACEPOINT_PROBE(sched, sched_process_exit)
{
    forget_thread(args->pid);
#ifdef HAVE_GROUP_DEAD
    bool last_thread = args->group_dead;
#else
    u64 id = bpf_get_current_pid_tgid();
    bool last_thread = (u32)id == id >> 32;  /* the leader: it exits once per process, if not always last */
#endif
    u32 tgid = watched_tgid();
    if (!last_thread || !tgid)
        return KEEP_EVENT;
    process_exits(tgid);
#ifdef KEY_BY_PROCESS
    /* Move the dead process's totals to an exited key (kept where the map is full: the agent then finds the
     * process gone and folds them all the same). */
    u64 live = tgid;
    WORKLOAD_TOTALS *stats = cgroups.lookup(&live);
    if (stats) {
        WORKLOAD_TOTALS last = *stats;
        u64 exited = exited_key(tgid);
        if (cgroups.update(&exited, &last) == 0)
            cgroups.delete(&live);
        else
            count_drop(DROP_CGROUP_MAP);
    }
#endif
    return KEEP_EVENT;
}

#if defined(KEY_BY_PROCESS) && !defined(PIDNS_INO)
/* Keyed by process, a child's place is its parent's until it moves: remember who forked it (its first event
 * announces both), and announce every move in the placing hierarchy with the new path, so a process that dies
 * before the agent reads its /proc entry is still placed exactly. Pids here are the host's, so sidecar mode (keys
 * are pids of its namespace) goes without. */
#define ANNOUNCE_MOVES
TRACEPOINT_PROBE(sched, sched_process_fork)
{
    u32 child = args->child_pid;
    struct fork_record fork = {.parent = bpf_get_current_pid_tgid() >> 32, .boot_ns = bpf_ktime_get_boot_ns()};
    forked_by.update(&child, &fork);
    return KEEP_EVENT;
}
#endif

#if defined(HAVE_CGROUP_ATTACH) || defined(ANNOUNCE_MOVES)
TRACEPOINT_PROBE(cgroup, cgroup_attach_task)
{
#ifdef HAVE_CGROUP_ATTACH
    u32 zero = 0;
    u64 *moves = cgroup_moves.lookup(&zero);
    if (moves)
        __sync_fetch_and_add(moves, 1);
#endif
#ifdef ANNOUNCE_MOVES
    if (args->dst_root != PLACE_HIERARCHY)
        return KEEP_EVENT;
    struct move_announcement move = {.tgid = args->pid, .boot_ns = bpf_ktime_get_boot_ns()};
    u32 length = args->data_loc_dst_path >> 16;
    if (length <= MOVE_PATH_MAX) {
        TP_DATA_LOC_READ_STR(move.path, dst_path, MOVE_PATH_MAX);
        move.path_len = length;
    }
    if (new_processes.ringbuf_output(&move, sizeof(move), 0))
        count_drop(DROP_ANNOUNCEMENT);
#endif
    return KEEP_EVENT;
}
#endif
#endif /* WORKLOAD_TOTALS */

#endif
