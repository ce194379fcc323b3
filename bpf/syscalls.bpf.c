/* sched_yield and futex accounting per cgroup and per process.
 *
 * Attached to the syscall-specific tracepoints only, so that syscalls the
 * agent does not watch pay nothing. Every probe does a bounded, constant
 * amount of work: one or two hash lookups and a few atomic adds. Nothing is
 * sent to user space per event; the agent reads the maps when scraped.
 *
 * Cgroup totals are accumulated directly, so they survive the exit of the
 * processes that produced them. Process entries exist only while the
 * process lives and are deleted when its thread group dies.
 *
 * Compile-time options (set by agent/probes/syscalls.py):
 *   MAX_CGROUPS, MAX_PROCESSES (0 turns per-process accounting off),
 *   MAX_THREADS, HAVE_GROUP_DEAD, HAVE_FUTEX_WAITV, HAVE_FUTEX_WAIT,
 *   HAVE_FUTEX_WAKE, HAVE_FUTEX_REQUEUE, PIDNS_DEV/PIDNS_INO in sidecar mode,
 *   and KEY_BY_PROCESS on hosts without cgroup2 (see schedwatch.h).
 */
#include "schedwatch.h"

/* FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME, from the futex(2) UAPI. */
#define FUTEX_FLAGS_MASK (128 | 256)

enum futex_class {
    FC_WAIT = 0,
    FC_WAKE = 1,
    FC_REQUEUE = 2,
    FC_LOCK_PI = 3,
    FC_WAITV = 4,
    FC_OTHER = 5,
    FC_COUNT = 6,
};

/* Upper bounds (inclusive, ns) of the futex wait histogram; the agent
 * exports the same bounds (agent/probes/syscalls.py, WAIT_BUCKET_BOUNDS). */
#define WAIT_BUCKETS 8

struct cgroup_stats {
    u64 yields;
    u64 futex_calls[FC_COUNT];
    u64 futex_wait_ns;
    u64 futex_wait_buckets[WAIT_BUCKETS];  /* their sum is the number of waits */
};

struct process_stats {
    u64 cgroup_id;  /* the workload key it last counted under */
    u64 yields;
    u64 futex_calls[FC_COUNT];
    u64 futex_wait_ns;
};

BPF_HASH(cgroups, u64, struct cgroup_stats, MAX_CGROUPS);
#if MAX_PROCESSES > 0
BPF_HASH(processes, u32, struct process_stats, MAX_PROCESSES);
#endif
/* Thread id -> ktime at entry of the futex call in progress that may block
 * (0: none). Entries are deleted when the thread exits. */
BPF_HASH(futex_start, u32, u64, MAX_THREADS);
BPF_ARRAY(drops, u64, DROP_REASONS);
#ifdef KEY_BY_PROCESS
BPF_RINGBUF_OUTPUT(new_processes, 64);
BPF_TABLE("lru_hash", u32, struct fork_record, forked_by, FORKS_REMEMBERED);
#endif

static __always_inline void count_drop(int reason)
{
    u64 *slot = drops.lookup(&reason);
    if (slot)
        __sync_fetch_and_add(slot, 1);
}

/* The totals of workload `key`, created if new (and, keyed by process,
 * announced to the agent); NULL, counted as a drop, when the map is full. */
static __always_inline struct cgroup_stats *cgroup_entry(u64 key)
{
    struct cgroup_stats *stats = cgroups.lookup(&key);
    if (stats)
        return stats;
    struct cgroup_stats zero = {};
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
    stats = cgroups.lookup(&key);
    if (!stats)
        count_drop(DROP_CGROUP_MAP);
    return stats;
}

#if MAX_PROCESSES > 0
static __always_inline struct process_stats *process_entry(u64 workload)
{
    u32 tgid = watched_tgid();
    struct process_stats zero = {};
    struct process_stats *stats = processes.lookup_or_try_init(&tgid, &zero);
    if (!stats) {
        count_drop(DROP_PROCESS_MAP);
        return 0;
    }
    stats->cgroup_id = workload;
    return stats;
}
#endif

static __always_inline u32 wait_bucket(u64 ns)
{
    if (ns <= 10000ULL)
        return 0;                   /* 10 us */
    if (ns <= 100000ULL)
        return 1;                   /* 100 us */
    if (ns <= 1000000ULL)
        return 2;                   /* 1 ms */
    if (ns <= 10000000ULL)
        return 3;                   /* 10 ms */
    if (ns <= 100000000ULL)
        return 4;                   /* 100 ms */
    if (ns <= 1000000000ULL)
        return 5;                   /* 1 s */
    if (ns <= 10000000000ULL)
        return 6;                   /* 10 s */
    return 7;                       /* +Inf */
}

static __always_inline u32 futex_class_of(int op)
{
    switch (op & ~FUTEX_FLAGS_MASK) {
    case 0:  /* FUTEX_WAIT */
    case 9:  /* FUTEX_WAIT_BITSET */
    case 11: /* FUTEX_WAIT_REQUEUE_PI */
        return FC_WAIT;
    case 1:  /* FUTEX_WAKE */
    case 5:  /* FUTEX_WAKE_OP */
    case 10: /* FUTEX_WAKE_BITSET */
        return FC_WAKE;
    case 3:  /* FUTEX_REQUEUE */
    case 4:  /* FUTEX_CMP_REQUEUE */
    case 12: /* FUTEX_CMP_REQUEUE_PI */
        return FC_REQUEUE;
    case 6:  /* FUTEX_LOCK_PI */
    case 7:  /* FUTEX_UNLOCK_PI */
    case 8:  /* FUTEX_TRYLOCK_PI */
    case 13: /* FUTEX_LOCK_PI2 */
        return FC_LOCK_PI;
    default:
        return FC_OTHER;
    }
}

/* Calls that can put the caller to sleep: their time inside is wait time. */
static __always_inline bool futex_op_blocks(int op)
{
    int cmd = op & ~FUTEX_FLAGS_MASK;
    return cmd == 0 || cmd == 9 || cmd == 11 || cmd == 6 || cmd == 13;
}

static __always_inline void futex_enter(u32 fclass, bool blocks)
{
    if (fclass >= FC_COUNT || !WATCHED())
        return;
    u64 key = workload_key();
    struct cgroup_stats *cg = cgroup_entry(key);
    if (cg)
        __sync_fetch_and_add(&cg->futex_calls[fclass], 1);
#if MAX_PROCESSES > 0
    struct process_stats *proc = process_entry(key);
    if (proc)
        __sync_fetch_and_add(&proc->futex_calls[fclass], 1);
#endif
    if (blocks) {
        u32 tid = bpf_get_current_pid_tgid();
        u64 now = bpf_ktime_get_ns();
        /* A thread keeps its slot until it exits: writing in place is much
         * cheaper than an update or a delete on every call. */
        u64 *slot = futex_start.lookup(&tid);
        if (slot)
            *slot = now;
        else if (futex_start.update(&tid, &now))
            count_drop(DROP_THREAD_MAP);
    }
}

static __always_inline void futex_exit(void)
{
    u32 tid = bpf_get_current_pid_tgid();
    u64 *start = futex_start.lookup(&tid);
    if (!start || *start == 0)
        return;
    u64 waited = bpf_ktime_get_ns() - *start;
    *start = 0;

    u64 key = workload_key();
    struct cgroup_stats *cg = cgroup_entry(key);
    if (cg) {
        __sync_fetch_and_add(&cg->futex_wait_ns, waited);
        u32 bucket = wait_bucket(waited);
        if (bucket < WAIT_BUCKETS)
            __sync_fetch_and_add(&cg->futex_wait_buckets[bucket], 1);
    }
#if MAX_PROCESSES > 0
    struct process_stats *proc = process_entry(key);
    if (proc)
        __sync_fetch_and_add(&proc->futex_wait_ns, waited);
#endif
}

TRACEPOINT_PROBE(syscalls, sys_enter_sched_yield)
{
    if (!WATCHED())
        return KEEP_EVENT;
    u64 key = workload_key();
    struct cgroup_stats *cg = cgroup_entry(key);
    if (cg)
        __sync_fetch_and_add(&cg->yields, 1);
#if MAX_PROCESSES > 0
    struct process_stats *proc = process_entry(key);
    if (proc)
        __sync_fetch_and_add(&proc->yields, 1);
#endif
    return KEEP_EVENT;
}

TRACEPOINT_PROBE(syscalls, sys_enter_futex)
{
    int op = args->op;
    futex_enter(futex_class_of(op), futex_op_blocks(op));
    return KEEP_EVENT;
}

TRACEPOINT_PROBE(syscalls, sys_exit_futex)
{
    futex_exit();
    return KEEP_EVENT;
}

#ifdef HAVE_FUTEX_WAITV
TRACEPOINT_PROBE(syscalls, sys_enter_futex_waitv)
{
    futex_enter(FC_WAITV, true);
    return KEEP_EVENT;
}

TRACEPOINT_PROBE(syscalls, sys_exit_futex_waitv)
{
    futex_exit();
    return KEEP_EVENT;
}
#endif

#ifdef HAVE_FUTEX_WAIT
TRACEPOINT_PROBE(syscalls, sys_enter_futex_wait)
{
    futex_enter(FC_WAIT, true);
    return KEEP_EVENT;
}

TRACEPOINT_PROBE(syscalls, sys_exit_futex_wait)
{
    futex_exit();
    return KEEP_EVENT;
}
#endif

#ifdef HAVE_FUTEX_WAKE
TRACEPOINT_PROBE(syscalls, sys_enter_futex_wake)
{
    futex_enter(FC_WAKE, false);
    return KEEP_EVENT;
}
#endif

#ifdef HAVE_FUTEX_REQUEUE
TRACEPOINT_PROBE(syscalls, sys_enter_futex_requeue)
{
    futex_enter(FC_REQUEUE, false);
    return KEEP_EVENT;
}
#endif

TRACEPOINT_PROBE(sched, sched_process_exit)
{
    u32 tid = args->pid;
    futex_start.delete(&tid);
#if MAX_PROCESSES > 0 || defined(KEY_BY_PROCESS)
#ifdef HAVE_GROUP_DEAD
    bool last_thread = args->group_dead;
#else
    u64 id = bpf_get_current_pid_tgid();
    bool last_thread = (u32)id == id >> 32;
#endif
    u32 tgid = watched_tgid();
    if (!last_thread || !tgid)
        return KEEP_EVENT;
#if MAX_PROCESSES > 0
    processes.delete(&tgid);
#endif
#ifdef KEY_BY_PROCESS
    /* Move the dead process's totals to an exited key (kept where the map is
     * full: the agent then finds the process gone and folds them all the same). */
    u64 live = tgid;
    struct cgroup_stats *stats = cgroups.lookup(&live);
    if (stats) {
        struct cgroup_stats last = *stats;
        u64 exited = exited_key(tgid);
        if (cgroups.update(&exited, &last) == 0)
            cgroups.delete(&live);
        else
            count_drop(DROP_CGROUP_MAP);
    }
#endif
#endif
    return KEEP_EVENT;
}

#if defined(KEY_BY_PROCESS) && !defined(PIDNS_INO)
/* Keyed by process, a child's place is its parent's until it moves: remember
 * who forked it (its first event announces both), and announce every move in
 * the placing hierarchy with the new path, so a process that dies before the
 * agent reads its /proc entry is still placed exactly. Pids here are the
 * host's, so sidecar mode (keys are pids of its namespace) goes without. */
TRACEPOINT_PROBE(sched, sched_process_fork)
{
    u32 child = args->child_pid;
    struct fork_record fork = {.parent = bpf_get_current_pid_tgid() >> 32, .boot_ns = bpf_ktime_get_boot_ns()};
    forked_by.update(&child, &fork);
    return KEEP_EVENT;
}

TRACEPOINT_PROBE(cgroup, cgroup_attach_task)
{
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
    return KEEP_EVENT;
}
#endif
