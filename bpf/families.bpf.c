/* System calls by family per workload: how many, and (for the timed workloads) how long in the kernel.
 *
 * Raw tracepoints on raw_syscalls:sys_enter and sys_exit: every system call of the machine runs these programs,
 * so each does a small, constant amount of work and sends nothing to user space. A raw tracepoint program does
 * not sit in front of the tracepoint's perf events (its return value is ignored): perf stat, perf trace and
 * other tracers see every event whatever it does. It returns KEEP_EVENT anyway, like every schedwatch program.
 *
 * sys_enter counts the call in its workload's entry, by family (family_of: syscall number -> family + 1, written
 * by the agent at load from agent/syscall_families.py; 0 until then, and such calls are not counted). For a timed
 * workload it also notes when the call began, in the calling thread's slot of calls_in_progress; sys_exit adds
 * the time to the workload the call began in. Which workloads are timed is the agent's choice (timed_workloads,
 * a small set), read again by a workload's entry only when the agent changed the set (timing.generation), so an
 * untimed workload pays one array lookup for it at entry, and one at return (pending: whether any thread whose
 * id shares the last 14 bits has a timed call in progress). sys_exit does nothing more while no workload is timed
 * (timing.epoch 0). With TIME_ALL every workload is timed and none of these maps exists.
 *
 * Compile-time options (set by agent/bpf/probes/families.py): MAX_CGROUPS, MAX_THREADS, MAX_TIMED, TIME_ALL,
 * HAVE_GROUP_DEAD, PIDNS_DEV/PIDNS_INO in sidecar mode, KEY_BY_PROCESS and PLACE_HIERARCHY (see schedwatch.h).
 */

/* The order of agent/syscall_families.py's FAMILIES. */
enum family {
    F_YIELD = 0,
    F_FUTEX = 1,
    F_CLOCK = 2,
    F_SLEEP = 3,
    F_POLL = 4,
    F_MEMORY = 5,
    F_PROCESS = 6,
    F_FILE = 7,
    F_NETWORK = 8,
    F_OTHER = 9,
    FAMILIES = 10,
};
#define SYSCALL_SLOTS 1024 /* family_of's size: numbers from here on (x32's, -1 for a cancelled call) are OTHER */

struct workload_syscalls {
    u64 calls[FAMILIES];
    u64 ns[FAMILIES];          /* time inside the calls of the family that returned while the workload was timed */
    u32 timing_generation;     /* timing.generation when `timed` was last read from timed_workloads */
    u32 timed;
};

/* The timed call in progress of one thread (start_ns 0: none). */
struct call_in_progress {
    u64 start_ns;
    u64 key;                   /* the workload it began in */
    u32 family;
    u32 epoch;                 /* timing.epoch when it began */
};

/* Written by the agent only. epoch: 0 while no workload is timed, a new value each time timing starts again
 * (a call that began under another epoch is not timed: sys_exit may not have run for it in between);
 * generation: changed with every change of timed_workloads. */
struct timing_state {
    u32 epoch;
    u32 generation;
};

BPF_ARRAY(family_of, u8, SYSCALL_SLOTS);
BPF_HASH(cgroups, u64, struct workload_syscalls, MAX_CGROUPS);
#define WORKLOAD_TOTALS struct workload_syscalls
#include "schedwatch.h"
BPF_HASH(calls_in_progress, u32, struct call_in_progress, MAX_THREADS);
/* How many threads whose id ends in each bit pattern have a timed call in progress (start_ns set in their slot):
 * sys_exit of a thread whose bucket is 0 returns after this array lookup, without looking for its slot. */
#ifndef TIME_ALL
#define PENDING_BUCKETS 16384
BPF_ARRAY(pending, u32, PENDING_BUCKETS);
BPF_ARRAY(timing, struct timing_state, 1);
BPF_HASH(timed_workloads, u64, u8, MAX_TIMED);
#endif

static __always_inline u32 family_of_call(u64 id)
{
    if (id >= SYSCALL_SLOTS)
        return F_OTHER;
    u32 slot = id;
    u8 *family = family_of.lookup(&slot);
    if (!family || *family == 0 || *family > FAMILIES)
        return FAMILIES; /* the agent has not filled the table yet */
    return *family - 1;
}

/* The epoch under which a call of this workload that begins now is timed; 0: not timed. */
static __always_inline u32 timing_epoch(struct workload_syscalls *stats, u64 key)
{
#ifdef TIME_ALL
    return 1;
#else
    u32 zero = 0;
    struct timing_state *state = timing.lookup(&zero);
    if (!state || state->epoch == 0)
        return 0;
    if (stats->timing_generation != state->generation) {
        stats->timed = timed_workloads.lookup(&key) != 0;
        stats->timing_generation = state->generation;
    }
    return stats->timed ? state->epoch : 0;
#endif
}

static __always_inline void count_pending(u32 tid, int change)
{
#ifndef TIME_ALL /* every thread's exit looks for its slot anyway */
    u32 bucket = tid & (PENDING_BUCKETS - 1);
    u32 *count = pending.lookup(&bucket);
    if (count)
        __sync_fetch_and_add(count, change);
#endif
}

static __always_inline void begin_timed_call(u64 key, u32 family, u32 epoch)
{
    u32 tid = bpf_get_current_pid_tgid();
    struct call_in_progress call = {.start_ns = bpf_ktime_get_ns(), .key = key, .family = family, .epoch = epoch};
    /* A thread keeps its slot until it exits: writing in place is much cheaper than an update on every call. */
    struct call_in_progress *slot = calls_in_progress.lookup(&tid);
    if (slot) {
        if (slot->start_ns == 0) /* else the last call's return went unseen: it is still counted as pending */
            count_pending(tid, 1);
        *slot = call;
    } else if (calls_in_progress.update(&tid, &call) == 0) {
        count_pending(tid, 1);
    } else {
        count_drop(DROP_THREAD_MAP);
    }
}

RAW_TRACEPOINT_PROBE(sys_enter)
{
    /* ctx->args[0] is the struct pt_regs * of the caller's user registers, ctx->args[1] the syscall number. */
    if (!WATCHED())
        return KEEP_EVENT;
    u64 family = family_of_call(ctx->args[1]);
    BOUND_BARRIER(family);
    if (family >= FAMILIES)
        return KEEP_EVENT;
    u64 key = workload_key();
    struct workload_syscalls *stats = workload_entry(key);
    if (!stats)
        return KEEP_EVENT;
    __sync_fetch_and_add(&stats->calls[family], 1);
    u32 epoch = timing_epoch(stats, key);
    if (epoch)
        begin_timed_call(key, family, epoch);
    return KEEP_EVENT;
}

RAW_TRACEPOINT_PROBE(sys_exit)
{
#ifdef TIME_ALL
    u32 epoch = 1;
#else
    u32 zero = 0;
    struct timing_state *state = timing.lookup(&zero);
    if (!state || state->epoch == 0)
        return KEEP_EVENT;
    u32 epoch = state->epoch;
#endif
    u32 tid = bpf_get_current_pid_tgid();
#ifndef TIME_ALL
    u32 bucket = tid & (PENDING_BUCKETS - 1);
    u32 *pending_here = pending.lookup(&bucket);
    if (!pending_here || *pending_here == 0)
        return KEEP_EVENT;
#endif
    struct call_in_progress *call = calls_in_progress.lookup(&tid);
    if (!call || call->start_ns == 0)
        return KEEP_EVENT;
    u64 took = bpf_ktime_get_ns() - call->start_ns;
    u64 family = call->family;
    BOUND_BARRIER(family);
    u64 key = call->key;
    bool current = call->epoch == epoch;
    call->start_ns = 0;
    count_pending(tid, -1);
    if (!current || family >= FAMILIES)
        return KEEP_EVENT;
    struct workload_syscalls *stats = cgroups.lookup(&key);
    if (stats)
        __sync_fetch_and_add(&stats->ns[family], took);
    return KEEP_EVENT;
}

/* A thread exits: its timed call's slot goes. */
static __always_inline void forget_thread(u32 tid)
{
    struct call_in_progress *call = calls_in_progress.lookup(&tid);
    if (call) {
        if (call->start_ns) /* exit_group, or a call whose return went unseen */
            count_pending(tid, -1);
        calls_in_progress.delete(&tid);
    }
}

static __always_inline void process_exits(u32 tgid)
{
}
