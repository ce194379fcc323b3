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
 * Call sites (CALL_SITES, x86-64 only): at the entry of sched_yield and of a futex wait the program also counts the
 * call in `call_sites` under (workload, process, instruction pointer, caller). The instruction pointer is where the
 * system call instruction is (the C library's stub, or the code that made the call itself: libgomp inlines its futex
 * calls). For sched_yield the caller is the return address at the user stack pointer: every C library's sched_yield
 * and syscall() are leaf stubs that push nothing, so the word there is the return address into the code that called
 * them (the only word of a process's memory the program reads). For a futex wait it is 0: the C library's futex
 * paths are not leaves, and one level up is the C library itself, so only the instruction pointer is counted. The
 * user registers come from the raw tracepoint's first argument (struct pt_regs *, whose x86-64 layout is part of
 * the user-space ABI: PTRACE_GETREGS). Entries stay until the agent has read them for the last time after their
 * process exited; a site that finds the map full is counted in drops[DROP_SITE_MAP].
 *
 * Compile-time options (set by agent/bpf/probes/families.py): MAX_CGROUPS, MAX_THREADS, MAX_TIMED, TIME_ALL,
 * HAVE_GROUP_DEAD, PIDNS_DEV/PIDNS_INO in sidecar mode, KEY_BY_PROCESS and PLACE_HIERARCHY (see schedwatch.h),
 * CALL_SITES with MAX_CALL_SITES, SYS_FUTEX, SYS_FUTEX_WAITV and SYS_FUTEX_WAIT (the numbers of this architecture).
 */
#include "schedwatch.h"

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
    u64 processes_exited;      /* processes whose last thread exited in the workload (threads are not counted) */
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
BPF_HASH(calls_in_progress, u32, struct call_in_progress, MAX_THREADS);
/* How many threads whose id ends in each bit pattern have a timed call in progress (start_ns set in their slot):
 * sys_exit of a thread whose bucket is 0 returns after this array lookup, without looking for its slot. */
#ifndef TIME_ALL
#define PENDING_BUCKETS 16384
BPF_ARRAY(pending, u32, PENDING_BUCKETS);
#endif
#ifndef TIME_ALL
BPF_ARRAY(timing, struct timing_state, 1);
BPF_HASH(timed_workloads, u64, u8, MAX_TIMED);
#endif
BPF_ARRAY(drops, u64, DROP_REASONS);
#ifdef CALL_SITES
/* What a site is counted under. kind: SITE_YIELD or SITE_FUTEX_WAIT. */
struct site_key {
    u64 workload;
    u64 ip;       /* after the system call instruction */
    u64 caller;   /* sched_yield: the return address at the user stack pointer; futex: 0 */
    u32 tgid;
    u32 kind;
};
enum site_kind {
    SITE_YIELD = 0,
    SITE_FUTEX_WAIT = 1,
};
BPF_HASH(call_sites, struct site_key, u64, MAX_CALL_SITES);
#endif
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

/* The totals of workload `key`, created if new (and, keyed by process, announced to the agent); NULL, counted
 * as a drop, when the map is full. */
static __always_inline struct workload_syscalls *workload_entry(u64 key)
{
    struct workload_syscalls *stats = cgroups.lookup(&key);
    if (stats)
        return stats;
    struct workload_syscalls zero = {};
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

#ifdef CALL_SITES
/* The x86-64 struct pt_regs from rsi on (offset 104 of 168): the registers a call site needs. */
struct site_regs {
    u64 si;       /* futex: op */
    u64 di;
    u64 orig_ax;
    u64 ip;
    u64 cs;
    u64 flags;
    u64 sp;
};
#define PT_REGS_SI_OFFSET 104
#define FUTEX_CMD_MASK 0x7f /* ~(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME) */

/* Whether system call *number* with first register set *regs* waits on a futex. */
static __always_inline bool futex_wait(u64 number, struct site_regs *regs)
{
    if (number == SYS_FUTEX_WAITV || number == SYS_FUTEX_WAIT)
        return true;
    if (number != SYS_FUTEX)
        return false;
    u32 op = regs->si & FUTEX_CMD_MASK;
    /* FUTEX_WAIT, FUTEX_LOCK_PI, FUTEX_WAIT_BITSET, FUTEX_WAIT_REQUEUE_PI, FUTEX_LOCK_PI2 */
    return op == 0 || op == 6 || op == 9 || op == 11 || op == 13;
}

static __always_inline void count_site(struct bpf_raw_tracepoint_args *ctx, u64 key, u64 family)
{
    struct site_regs regs;
    if (bpf_probe_read_kernel(&regs, sizeof(regs), (void *)ctx->args[0] + PT_REGS_SI_OFFSET))
        return;
    struct site_key site = {.workload = key, .ip = regs.ip, .tgid = watched_tgid()};
    if (family == F_YIELD) {
        site.kind = SITE_YIELD;
        bpf_probe_read_user(&site.caller, sizeof(site.caller), (void *)regs.sp); /* 0 where unreadable */
    } else if (futex_wait(ctx->args[1], &regs)) {
        site.kind = SITE_FUTEX_WAIT;
    } else {
        return;
    }
    u64 *count = call_sites.lookup(&site);
    if (count) {
        __sync_fetch_and_add(count, 1);
        return;
    }
    u64 one = 1;
    if (call_sites.insert(&site, &one) == 0)
        return;
    count = call_sites.lookup(&site); /* another CPU inserted it first, or the map is full */
    if (count)
        __sync_fetch_and_add(count, 1);
    else
        count_drop(DROP_SITE_MAP);
}
#endif

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
#ifdef CALL_SITES
    if (family <= F_FUTEX) /* F_YIELD, F_FUTEX: other calls pay one comparison */
        count_site(ctx, key, family);
#endif
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

/* A thread exits: its slot goes; when it is the last thread of its process, the process is counted as exited in
 * its workload (process churn: short-lived processes, told from threads that come and go in a long-lived one). */
TRACEPOINT_PROBE(sched, sched_process_exit)
{
    u32 tid = args->pid;
    struct call_in_progress *call = calls_in_progress.lookup(&tid);
    if (call) {
        if (call->start_ns) /* exit_group, or a call whose return went unseen */
            count_pending(tid, -1);
        calls_in_progress.delete(&tid);
    }
#ifdef HAVE_GROUP_DEAD
    bool last_thread = args->group_dead;
#else
    u64 id = bpf_get_current_pid_tgid();
    bool last_thread = (u32)id == id >> 32; /* the leader: it exits once per process, if not always last */
#endif
    u32 tgid = watched_tgid();
    if (!last_thread || !tgid)
        return KEEP_EVENT;
    struct workload_syscalls *exiting = workload_entry(workload_key());
    if (exiting)
        __sync_fetch_and_add(&exiting->processes_exited, 1);
#ifdef KEY_BY_PROCESS
    /* Move the dead process's totals to an exited key (kept where the map is full: the agent then finds the
     * process gone and folds them all the same). */
    u64 live = tgid;
    struct workload_syscalls *stats = cgroups.lookup(&live);
    if (stats) {
        struct workload_syscalls last = *stats;
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
/* Keyed by process, a child's place is its parent's until it moves (see bpf/syscalls.bpf.c, which does the same). */
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
