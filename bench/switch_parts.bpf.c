/* bench/switch_parts.py: schedwatch's sched_switch path built up one part at a time (PARTS = 0..5), each level
 * doing what the level below does and one more part of what bpf/sched.bpf.c does per switch, on the same maps and
 * sizes, so that the difference between two levels is what that part costs:
 *   0  the clock read (the clock-only floor)
 *   1  + the outgoing thread's entry in a thread hash map, and its new off-CPU period written there
 *   2  + the check whether any task moved cgroup since its key was read (an array slot)
 *   3  + the incoming thread's entry, its off-CPU period and wait computed and cleared
 *   4  + its workload's totals in a hash map keyed by cgroup id
 *   5  + the atomic adds into those totals: off-CPU time, run-queue wait, its histogram bucket, its holder, blocked
 *      time (five, as a woken thread's switch-in does)
 * With -DSLOTS, the threads' states are found as bpf/sched.bpf.c finds them: in the slot of an array their
 * thread id maps to (the hash map only for a thread whose slot another holds, which this workload never has);
 * with -DWORKLOAD_SLOTS as well, the workload's totals too: in the slot of an array its key maps to.
 */
#include "bpf/schedwatch.h"  /* relative to the checkout: the benchmark runs there */

struct thread_state {
    u64 cgroup_id;
    u64 offcpu_since;
    u64 runnable_since;
    u32 tgid;
    u8 reason;
    u8 sleep;
    u8 kind;
    u8 unused;
    u64 key_read_at;
};

struct totals {
    u64 offcpu_ns[2];
    u64 runq_ns;
    u64 runq_buckets[10];
    u64 missed[2];
    u64 runq_by_holder_ns[3];
    u64 blocked_ns[2];
    u64 processes_exited;
};

BPF_HASH(threads, u32, struct thread_state, MAX_THREADS);
#ifdef SLOTS
struct thread_slot {
    u64 tid;
    struct thread_state state;
};
BPF_ARRAY(thread_slots, struct thread_slot, MAX_THREADS);

static __always_inline struct thread_state *thread_find(u32 tid)
{
    u32 index = tid % MAX_THREADS;
    struct thread_slot *slot = thread_slots.lookup(&index);
    if (slot && slot->tid == tid)
        return &slot->state;
    return threads.lookup(&tid);
}

static __always_inline struct thread_state *thread_entry(u32 tid)
{
    u32 index = tid % MAX_THREADS;
    struct thread_slot *slot = thread_slots.lookup(&index);
    if (slot && slot->tid == tid)
        return &slot->state;
    struct thread_state zero = {};
    if (slot && slot->tid == 0 && __sync_val_compare_and_swap(&slot->tid, 0, tid) == 0) {
        slot->state = zero;
        return &slot->state;
    }
    return threads.lookup_or_try_init(&tid, &zero);
}
#else
static __always_inline struct thread_state *thread_find(u32 tid)
{
    return threads.lookup(&tid);
}

static __always_inline struct thread_state *thread_entry(u32 tid)
{
    struct thread_state zero = {};
    return threads.lookup_or_try_init(&tid, &zero);
}
#endif
BPF_HASH(cgroups, u64, struct totals, MAX_CGROUPS);
BPF_ARRAY(moves, u64, 1);
#ifdef WORKLOAD_SLOTS
struct workload_slot {
    u64 key;
    struct totals totals;
};
BPF_ARRAY(workload_slots, struct workload_slot, MAX_CGROUPS);
#endif

static __always_inline struct totals *totals_of(u64 key)
{
#ifdef WORKLOAD_SLOTS
    u32 index = key % MAX_CGROUPS;
    struct workload_slot *slot = workload_slots.lookup(&index);
    if (slot && key != 0) {
        if (slot->key == key)
            return &slot->totals;
        if (slot->key == 0 && __sync_val_compare_and_swap(&slot->key, 0, key) == 0)
            return &slot->totals;
    }
#endif
    struct totals *cg = cgroups.lookup(&key);
    if (!cg) {
        struct totals empty = {};
        cgroups.insert(&key, &empty);
        cg = cgroups.lookup(&key);
    }
    return cg;
}

TRACEPOINT_PROBE(sched, sched_switch)
{
    u64 now = bpf_ktime_get_ns();
#if PARTS >= 1
    u32 prev = args->prev_pid;
    if (prev != 0) {
        struct thread_state *state = thread_entry(prev);
        if (state) {
#if PARTS >= 2
            u32 slot = 0;
            u64 *moved = moves.lookup(&slot);
            u64 read_at = (moved ? *moved : 0) + 1;
            if (state->key_read_at != read_at) {
                state->key_read_at = read_at;
                state->cgroup_id = bpf_get_current_cgroup_id();
            }
#else
            if (state->cgroup_id == 0)
                state->cgroup_id = bpf_get_current_cgroup_id();
#endif
            bool runnable = (args->prev_state & 0xff) == 0;
            state->offcpu_since = now;
            state->reason = runnable ? 0 : 1;
            state->runnable_since = runnable ? now : 0;
        }
    }
#endif
#if PARTS >= 3
    u32 next = args->next_pid;
    if (next == 0)
        return KEEP_EVENT;
    struct thread_state *in = thread_find(next);
    if (!in || in->offcpu_since == 0)
        return KEEP_EVENT;
    u64 offcpu = now - in->offcpu_since;
    u64 waited = in->runnable_since ? now - in->runnable_since : offcpu / 2;
    u32 reason = in->reason & 1;
    u64 key = in->cgroup_id;
    in->offcpu_since = 0;
    in->runnable_since = 0;
#if PARTS >= 4
    struct totals *cg = totals_of(key);
#if PARTS >= 5
    if (cg) {
        __sync_fetch_and_add(&cg->offcpu_ns[reason], offcpu);
        __sync_fetch_and_add(&cg->runq_ns, waited);
        u32 bucket = waited > 10000 ? 1 : 0;
        __sync_fetch_and_add(&cg->runq_buckets[bucket], 1);
        __sync_fetch_and_add(&cg->runq_by_holder_ns[reason], waited);
        __sync_fetch_and_add(&cg->blocked_ns[reason], offcpu - waited);
    }
#endif
#endif
#endif
    return KEEP_EVENT;
}

/* Only the threads that were seen leaving a CPU get woken into a wait: as in the real program. */
TRACEPOINT_PROBE(sched, sched_wakeup)
{
#if PARTS >= 3
    u32 tid = args->pid;
    struct thread_state *state = thread_find(tid);
    if (state && state->runnable_since == 0)
        state->runnable_since = bpf_ktime_get_ns();
#endif
    return KEEP_EVENT;
}
