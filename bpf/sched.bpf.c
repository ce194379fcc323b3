/* Off-CPU time, run-queue latency by holder, and blocked time by kind of
 * sleep, per cgroup (and off-CPU time and run-queue wait per process, opt-in).
 *
 * sched_switch fires on every context switch of the machine, so each probe
 * does a fixed, small amount of work: the two threads' states and the incoming
 * thread's workload totals in array slots (a hash lookup instead for a thread,
 * or a workload, whose slot another holds: see struct thread_slot and struct
 * workload_slot), the cgroup-move count's array slot and a few atomic adds; one
 * or two hash lookups more after a wait another workload held the CPU for; no
 * loops, nothing sent to user space (and, once per thread and after a cgroup
 * move, one user-stack read).
 *
 * Per thread the program remembers when it left the CPU, why, its cgroup,
 * and since when it has been runnable. When the thread runs again:
 *   off-CPU time     = now - left the CPU, by reason: preempted (still
 *                      runnable when switched out) or blocked (sleeping);
 *   run-queue delay  = now - became runnable (woken, new, or preempted),
 *                      attributed to the thread that waited, in the cgroup
 *                      it was switched out from (or its parent's, if new),
 *                      and split by holder (enum holder, below);
 *   blocked time     = woken - left the CPU asleep (now - left, if no
 *                      wake-up was seen), by the kind of sleep (enum sleep).
 * So a thread's time is running + run-queue delay + blocked time, apart from
 * a stopped or traced thread's time (T, t, P: in neither) and what the kernel
 * did not deliver (enum missed_event).
 *
 * A thread's workload key is read when it first leaves a CPU and again only
 * after some task moved to another cgroup (HAVE_CGROUP_ATTACH: counted in
 * `cgroup_moves` by the cgroup_attach_task tracepoint, which fires once the
 * move is done, so a thread switched out in the instant between its move and
 * the count keeps its old key for that one period); without that tracepoint
 * the key is read at every switch.
 *
 * Compile-time options (agent/probes/sched.py): MAX_CGROUPS, MAX_PROCESSES,
 * MAX_THREADS, STATE_MASK (the prev_state bits that mean "not runnable",
 * read from this kernel's tracepoint format, never from a header), DEAD_MASK
 * (the bits of a task's last switch-out after it exited, from the same format),
 * PIDNS_DEV/PIDNS_INO in sidecar mode (only threads of that pid namespace),
 * KEY_BY_PROCESS on hosts without cgroup2 (see schedwatch.h),
 * HAVE_CGROUP_ATTACH where the kernel has the cgroup_attach_task tracepoint,
 * COUNT_MISSED_WAKEUPS where sched_switch's prev_state can be trusted, and
 * INTERRUPTIBLE_MASK / UNINTERRUPTIBLE_MASK (the prev_state bits of "S", and
 * of "D" and "I", from the same format).
 */

enum offcpu_reason { PREEMPTED = 0, BLOCKED = 1, REASONS = 2 };

/* Events the kernel did not deliver, found when a thread's next event
 * contradicts its state (the agent exports them, per workload, in this order):
 *   switch_in  a thread leaves a CPU although it was never seen arriving: the
 *              switch that ran it was lost, and with it this thread's last
 *              off-CPU period (and that of the thread it took the CPU from, uncounted);
 *   wakeup     a thread runs after a sleep although it was never seen woken:
 *              its wait for a CPU is lost.
 * While a tracing BPF program runs on a CPU, a tracepoint raised there reaches
 * no other one; a perf event raised while one is being handled in the same
 * context is dropped for perf and BPF alike.
 *
 * Missed wake-ups are counted only with COUNT_MISSED_WAKEUPS: from Linux 5.18
 * to 6.15, sched_switch reports a thread that had a signal pending as asleep
 * although it stays runnable, and it then runs again with no wake-up at all. */
enum missed_event { MISSED_SWITCH_IN = 0, MISSED_WAKEUP = 1, MISSED_EVENTS = 2 };

/* Who held the CPU while a thread waited for it: the task the CPU switched
 * from when the thread got it (the `prev` of that switch), a thread of the
 * same workload, of another one, or the kernel (a kernel thread, or no task:
 * an idle CPU's wait is the wake-up's own latency). One holder per wait: when
 * several tasks ran in turn during one wait, the last one gets all of it.
 * Interrupts are not told apart: their time is the interrupted task's.
 * Kernel threads are the tasks without a user address space (no user stack
 * to read, checked once per thread); in sidecar mode a task outside the
 * watched pid namespace, kernel threads included, is "other". */
enum holder { HOLDER_SELF = 0, HOLDER_OTHER = 1, HOLDER_KERNEL = 2, HOLDERS = 3 };

/* What a blocked thread slept in (prev_state when it left the CPU):
 * interruptible "S"; uninterruptible "D", with "I" (TASK_IDLE: uninterruptible
 * without counting in the load); anything else (stopped, traced, parked) is
 * not blocked time. */
enum sleep { SLEEP_INTERRUPTIBLE = 0, SLEEP_UNINTERRUPTIBLE = 1, SLEEPS = 2, SLEEP_OTHER = 2 };

#ifndef INTERRUPTIBLE_MASK
#define INTERRUPTIBLE_MASK 0x1   /* "S" since Linux 4.14 */
#endif
#ifndef UNINTERRUPTIBLE_MASK
#define UNINTERRUPTIBLE_MASK 0x82  /* "D" | "I" since Linux 4.14 */
#endif

enum task_kind { KIND_UNKNOWN = 0, KIND_USER = 1, KIND_KERNEL = 2 };

/* Upper bounds (inclusive, ns) of the run-queue histogram; the agent exports
 * the same bounds (agent/probes/sched.py, RUNQ_BUCKET_BOUNDS). */
#define RUNQ_BUCKETS 10

struct thread_state {
    u64 cgroup_id;       /* workload key (cgroup, or process) it last ran in */
    u64 offcpu_since;    /* when it left the CPU; 0 while running or unknown */
    u64 runnable_since;  /* when it became runnable; 0 unless waiting for a CPU */
    u32 tgid;            /* kept only with per-process totals (MAX_PROCESSES > 0) */
    u8 reason;           /* enum offcpu_reason of the current off-CPU period */
    u8 sleep;            /* enum sleep of a blocked period */
    u8 kind;             /* enum task_kind, read with the key */
    u8 unused;
    u64 key_read_at;     /* cgroup moves counted when cgroup_id was read, plus one; 0: never read */
};

/* A thread's state lives in the slot of `thread_slots` its id maps to (thread id modulo MAX_THREADS), found by an
 * array index the verifier inlines, while no other thread holds that slot; a thread whose slot another one holds
 * keeps its state in the `threads` hash map, until it exits. A slot is taken by compare-and-swap of its `tid` (two
 * CPUs may try at once) and freed when its thread exits. */
struct thread_slot {
    u64 tid;  /* the thread holding the slot; 0: free (64 bits: the compare-and-swap this compiler makes) */
    struct thread_state state;
};

struct cgroup_sched {
    u64 offcpu_ns[REASONS];
    u64 runq_ns;
    u64 runq_buckets[RUNQ_BUCKETS];  /* their sum is the number of waits */
    u64 missed[MISSED_EVENTS];
    u64 runq_by_holder_ns[HOLDERS];  /* their sum is runq_ns */
    u64 blocked_ns[SLEEPS];
    u64 processes_exited;  /* processes whose last thread exited in the workload (threads are not counted) */
    u64 offcpu_periods[REASONS];     /* the off-CPU periods offcpu_ns sums, counted as each ends */
};

struct process_sched {
    u64 cgroup_id;
    u64 offcpu_ns[REASONS];
    u64 runq_ns;
    u64 runq_waits;
    u64 runq_by_holder_ns[HOLDERS];  /* their sum is runq_ns */
    u64 blocked_ns[SLEEPS];
};

/* Who held the CPU, by workload, while a thread of another workload waited for it: the HOLDER_OTHER part of
 * runq_by_holder_ns split by the holder's workload key (a task of no workload here, in sidecar mode, is not
 * counted). Pairs grow with the square of the workloads sharing CPUs, so the map is an LRU hash of NEIGHBOUR_PAIRS
 * entries (agent/bpf/probes/sched.py): a new pair that finds it full takes the place of the pair that waited least
 * recently, whose count since the agent last read it is lost (`since` tells the agent the pair was made again, so
 * its count restarting from 0 never shows as going backwards). A pair the kernel finds no room for at all is
 * counted in `drops` and stays in the holder split. */
struct neighbour_pair {
    u64 waiter;  /* workload key of the thread that waited */
    u64 holder;  /* workload key of the task the CPU switched from */
};

struct neighbour_wait {
    u64 waited_ns;
    u64 since;  /* bpf_ktime_get_ns when the entry was made */
};

#ifndef NEIGHBOUR_PAIRS
#define NEIGHBOUR_PAIRS (2 * MAX_CGROUPS)
#endif

BPF_HASH(cgroups, u64, struct cgroup_sched, MAX_CGROUPS);
#define WORKLOAD_TOTALS struct cgroup_sched
#include "schedwatch.h"
#ifndef KEY_BY_PROCESS
/* A workload's totals live in the slot of `workload_slots` its key maps to (key modulo MAX_CGROUPS), found by an
 * array index the verifier inlines, while no other workload holds that slot; a workload whose slot another holds
 * keeps its totals in the `cgroups` hash map. The agent reads both and adds a key's two parts (a workload that
 * had an entry before it got its slot has both). A slot is taken by compare-and-swap of its `key`, first to
 * CLAIMING_KEY while the taker zeroes the totals (a CPU that finds it claiming uses the hash map), then to the
 * taker's key. It is freed only for a workload the agent has forgotten (a removed cgroup whose last values it
 * read): the agent puts such a key in `forgotten_keys`, and the next workload that maps to the slot takes it over.
 * (Keyed by process the lifecycle moves a dead process's totals to an exited key in the hash map: no slots.) */
#define WORKLOAD_SLOTS
#define CLAIMING_KEY (~0ULL)
struct workload_slot {
    u64 key;  /* the workload holding the slot; 0: free */
    struct cgroup_sched totals;
};
BPF_ARRAY(workload_slots, struct workload_slot, MAX_CGROUPS);
BPF_HASH(forgotten_keys, u64, u8, MAX_CGROUPS);  /* at most one per slot: a forgotten key holds one slot at most */
#endif
BPF_ARRAY(thread_slots, struct thread_slot, MAX_THREADS);
BPF_HASH(threads, u32, struct thread_state, MAX_THREADS);
BPF_TABLE("lru_hash", struct neighbour_pair, struct neighbour_wait, neighbours, NEIGHBOUR_PAIRS);
#if MAX_PROCESSES > 0
BPF_HASH(processes, u32, struct process_sched, MAX_PROCESSES);
#endif
#ifdef COUNT_MISSED_WAKEUPS
/* When the agent started counting missed wake-ups (bpf_ktime_get_ns; 0: not
 * yet): bcc attaches sched_switch before sched_wakeup, and a thread woken in
 * between must not count as a wake-up missed. */
BPF_ARRAY(wakeups_watched_since, u64, 1);
#endif

static __always_inline u32 runq_bucket(u64 ns)
{
    if (ns <= 10000ULL)
        return 0;                   /* 10 us */
    if (ns <= 100000ULL)
        return 1;                   /* 100 us */
    if (ns <= 500000ULL)
        return 2;                   /* 500 us */
    if (ns <= 1000000ULL)
        return 3;                   /* 1 ms */
    if (ns <= 2500000ULL)
        return 4;                   /* 2.5 ms */
    if (ns <= 5000000ULL)
        return 5;                   /* 5 ms */
    if (ns <= 10000000ULL)
        return 6;                   /* 10 ms */
    if (ns <= 25000000ULL)
        return 7;                   /* 25 ms */
    if (ns <= 100000000ULL)
        return 8;                   /* 100 ms */
    return 9;                       /* +Inf */
}

static __always_inline struct thread_slot *slot_of(u32 tid)
{
    u32 index = tid % MAX_THREADS;
    return thread_slots.lookup(&index);
}

/* Whether `slot` is free and now taken by thread `tid`. */
static __always_inline bool slot_taken(struct thread_slot *slot, u32 tid)
{
    return slot->tid == 0 && __sync_val_compare_and_swap(&slot->tid, 0, tid) == 0;
}

/* The state of thread `tid`, or NULL if it has none. */
static __always_inline struct thread_state *thread_find(u32 tid)
{
    struct thread_slot *slot = slot_of(tid);
    if (slot && slot->tid == tid)
        return &slot->state;
    return threads.lookup(&tid);
}

/* The state of thread `tid`, made empty if it has none (NULL, counted in drops, when there is no room). */
static __always_inline struct thread_state *thread_entry(u32 tid)
{
    struct thread_slot *slot = slot_of(tid);
    if (slot && slot->tid == tid)
        return &slot->state;
    struct thread_state zero = {};
    struct thread_state *state = threads.lookup(&tid);
    if (state)
        return state;  /* its slot was held when it got this entry: it keeps the entry until it exits */
    if (slot && slot_taken(slot, tid)) {
        slot->state = zero;
        return &slot->state;
    }
    state = threads.lookup_or_try_init(&tid, &zero);
    if (!state)
        count_drop(DROP_THREAD_MAP);
    return state;
}

/* The totals of workload `key`: its slot's, or its entry in the `cgroups` hash map (made if new; NULL, counted in
 * drops, when that map is full). */
static __always_inline struct cgroup_sched *workload_totals(u64 key)
{
#ifdef WORKLOAD_SLOTS
    u32 index = key % MAX_CGROUPS;
    struct workload_slot *slot = workload_slots.lookup(&index);
    if (slot && key != 0 && key != CLAIMING_KEY) {
        u64 holder = slot->key;
        if (holder == key)
            return &slot->totals;
        if (holder != CLAIMING_KEY && (holder == 0 || forgotten_keys.lookup(&holder)) &&
            __sync_val_compare_and_swap(&slot->key, holder, CLAIMING_KEY) == holder) {
            __builtin_memset(&slot->totals, 0, sizeof(slot->totals));
            if (holder)
                forgotten_keys.delete(&holder);
            __sync_val_compare_and_swap(&slot->key, CLAIMING_KEY, key);
            return &slot->totals;
        }
    }
#endif
    return workload_entry(key);
}

/* One more event of kind `what` (enum missed_event) missed in workload `key`. */
static __always_inline void count_missed(u64 key, u32 what)
{
    struct cgroup_sched *cg = workload_totals(key);
    if (cg && what < MISSED_EVENTS)
        __sync_fetch_and_add(&cg->missed[what], 1);
}

/* Whether a thread that went to sleep at `slept_at` and runs now without a
 * wake-up seen is a wake-up the kernel did not deliver. */
static __always_inline bool wakeup_missed(u64 slept_at)
{
#ifdef COUNT_MISSED_WAKEUPS
    u32 zero = 0;
    u64 *since = wakeups_watched_since.lookup(&zero);
    return since && *since && slept_at > *since;
#else
    return false;
#endif
}

/* `waited` ns of workload `waiter`'s wait for a CPU, held by workload `holder`, which ended at `now`. */
static __always_inline void count_neighbour(u64 waiter, u64 holder, u64 waited, u64 now)
{
    struct neighbour_pair pair = {.waiter = waiter, .holder = holder};
    struct neighbour_wait *held = neighbours.lookup(&pair);
    if (held) {
        __sync_fetch_and_add(&held->waited_ns, waited);
        return;
    }
    /* A first wait of this pair: NOEXIST, so that of two CPUs adding it at once one adds to the other's entry. */
    struct neighbour_wait first = {.waited_ns = waited, .since = now};
    if (neighbours.insert(&pair, &first) == 0)
        return;
    held = neighbours.lookup(&pair);
    if (held)
        __sync_fetch_and_add(&held->waited_ns, waited);
    else
        count_drop(DROP_NEIGHBOUR_MAP);
}

/* The thread `tid` is about to run, taking the CPU from a task of workload
 * `holder_key` (or from the kernel): account its off-CPU period and wait. */
static __always_inline void account_switch_in(u32 tid, u64 now, u64 holder_key, bool holder_kernel)
{
    struct thread_state *state = thread_find(tid);
    if (!state || (state->offcpu_since == 0 && state->runnable_since == 0))
        return;
    u64 offcpu = state->offcpu_since ? now - state->offcpu_since : 0;
    u64 waited = state->runnable_since ? now - state->runnable_since : 0;
    u32 reason = state->reason < REASONS ? state->reason : BLOCKED;
    u64 cgroup_id = state->cgroup_id;
    bool did_wait = state->runnable_since != 0;
    u64 blocked = 0;
    if (reason == BLOCKED && state->offcpu_since) {
        if (!did_wait)
            blocked = offcpu;
        else if (state->runnable_since > state->offcpu_since)
            blocked = state->runnable_since - state->offcpu_since;
    }
    u32 sleep = state->sleep;
    bool missed_wakeup =
        reason == BLOCKED && !did_wait && state->offcpu_since && wakeup_missed(state->offcpu_since);
    state->offcpu_since = 0;
    state->runnable_since = 0;
    u32 holder = holder_kernel ? HOLDER_KERNEL : holder_key == cgroup_id ? HOLDER_SELF : HOLDER_OTHER;

    struct cgroup_sched *cg = workload_totals(cgroup_id);
    if (cg) {
        if (missed_wakeup)
            __sync_fetch_and_add(&cg->missed[MISSED_WAKEUP], 1);
        if (offcpu) {
            __sync_fetch_and_add(&cg->offcpu_ns[reason], offcpu);
            __sync_fetch_and_add(&cg->offcpu_periods[reason], 1);
        }
        if (did_wait) {
            __sync_fetch_and_add(&cg->runq_ns, waited);
            u32 bucket = runq_bucket(waited);
            if (bucket < RUNQ_BUCKETS)
                __sync_fetch_and_add(&cg->runq_buckets[bucket], 1);
            __sync_fetch_and_add(&cg->runq_by_holder_ns[holder], waited);
        }
        BOUND_BARRIER(sleep);
        if (blocked && sleep < SLEEPS)
            __sync_fetch_and_add(&cg->blocked_ns[sleep], blocked);
    }
    if (did_wait && holder == HOLDER_OTHER && holder_key)
        count_neighbour(cgroup_id, holder_key, waited, now);
#if MAX_PROCESSES > 0
    u32 tgid = state->tgid;
    if (tgid == 0)
        return;
    struct process_sched pzero = {};
    struct process_sched *proc = processes.lookup_or_try_init(&tgid, &pzero);
    if (!proc) {
        count_drop(DROP_PROCESS_MAP);
        return;
    }
    proc->cgroup_id = cgroup_id;
    if (offcpu)
        __sync_fetch_and_add(&proc->offcpu_ns[reason], offcpu);
    if (did_wait) {
        __sync_fetch_and_add(&proc->runq_ns, waited);
        __sync_fetch_and_add(&proc->runq_waits, 1);
        __sync_fetch_and_add(&proc->runq_by_holder_ns[holder], waited);
    }
    BOUND_BARRIER(sleep);
    if (blocked && sleep < SLEEPS)
        __sync_fetch_and_add(&proc->blocked_ns[sleep], blocked);
#endif
}

/* Whether current is a kernel thread: it has no user stack (no address space). */
static __always_inline u8 current_kind(void *ctx)
{
    u64 ip = 0;
    return bpf_get_stack(ctx, &ip, sizeof(ip), BPF_F_USER_STACK) > 0 ? KIND_USER : KIND_KERNEL;
}

/* Read the outgoing thread's workload key (and kind) again if never read, or
 * if a task has moved to another cgroup since. */
static __always_inline void refresh_workload_key(void *ctx, struct thread_state *state)
{
#ifdef HAVE_CGROUP_ATTACH
    u32 zero = 0;
    u64 *moves = cgroup_moves.lookup(&zero);
    u64 read_at = (moves ? *moves : 0) + 1;
    if (state->key_read_at == read_at)
        return;
    state->key_read_at = read_at;
    state->kind = current_kind(ctx);
#else
    if (state->kind == KIND_UNKNOWN)
        state->kind = current_kind(ctx);
#endif
    state->cgroup_id = workload_key();  /* current is still the outgoing thread */
}

static __always_inline u32 sleep_of(u64 prev_state)
{
    if (prev_state & INTERRUPTIBLE_MASK)
        return SLEEP_INTERRUPTIBLE;
    if (prev_state & UNINTERRUPTIBLE_MASK)
        return SLEEP_UNINTERRUPTIBLE;
    return SLEEP_OTHER;
}

TRACEPOINT_PROBE(sched, sched_switch)
{
    u64 now = bpf_ktime_get_ns();
    u32 prev = args->prev_pid;
    u64 holder_key = 0;  /* not a workload's key: "other" */
    bool holder_kernel = prev == 0;  /* pid 0: the idle task */
    if (args->prev_state & DEAD_MASK) {
        /* An exited thread leaves the CPU for good (after sched_process_exit):
         * no state for it, or dead threads would fill the map. */
        forget_thread(prev);
        holder_key = workload_key();
    } else if (prev != 0 && WATCHED()) {
        struct thread_state *state = thread_entry(prev);
        if (state) {
            bool runnable = (args->prev_state & STATE_MASK) == 0;
            if (state->offcpu_since)  /* never seen arriving since it last left */
                count_missed(state->cgroup_id, MISSED_SWITCH_IN);
            refresh_workload_key(args, state);
#if MAX_PROCESSES > 0
            state->tgid = watched_tgid();
#endif
            state->offcpu_since = now;
            state->reason = runnable ? PREEMPTED : BLOCKED;
            state->sleep = runnable ? SLEEP_OTHER : sleep_of(args->prev_state);
            state->runnable_since = runnable ? now : 0;
            holder_key = state->cgroup_id;
            holder_kernel = state->kind == KIND_KERNEL;
        }
    }
    u32 next = args->next_pid;
    if (next != 0)
        account_switch_in(next, now, holder_key, holder_kernel);
    return KEEP_EVENT;
}

/* Only threads seen leaving a CPU have an entry: the first wake-up of a thread
 * that was asleep when the agent started is not counted. */
TRACEPOINT_PROBE(sched, sched_wakeup)
{
    u32 tid = args->pid;
    struct thread_state *state = thread_find(tid);
    if (state && state->runnable_since == 0)
        state->runnable_since = bpf_ktime_get_ns();
    return KEEP_EVENT;
}

/* A new thread: runnable from now, in the workload of its creator (current). */
TRACEPOINT_PROBE(sched, sched_wakeup_new)
{
    if (!WATCHED())
        return KEEP_EVENT;
    u32 tid = args->pid;
    struct thread_state state = {
        .cgroup_id = workload_key(),
        .runnable_since = bpf_ktime_get_ns(),
        .tgid = 0,  /* unknown until it first leaves a CPU: new thread or new process */
        .reason = BLOCKED,
    };
    struct thread_slot *slot = slot_of(tid);
    if (slot && (slot->tid == tid || slot_taken(slot, tid)))
        slot->state = state;
    else if (threads.update(&tid, &state))
        count_drop(DROP_THREAD_MAP);
    return KEEP_EVENT;
}

static __always_inline void forget_thread(u32 tid)
{
    struct thread_slot *slot = slot_of(tid);
    if (slot && slot->tid == tid)
        slot->tid = 0;
    threads.delete(&tid);  /* an entry made while its slot was held, or one the slot has since replaced */
}

/* Counted in the workload the exiting thread is in (keyed by process: the process itself, before its totals move
 * to its exited key). */
static __always_inline void process_exits(u32 tgid)
{
#if MAX_PROCESSES > 0
    processes.delete(&tgid);
#endif
    struct cgroup_sched *exiting = workload_totals(workload_key());
    if (exiting)
        __sync_fetch_and_add(&exiting->processes_exited, 1);
}
