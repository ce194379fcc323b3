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
 * Call sites (CALL_SITES, x86-64 only): each sched_yield and futex wait is
 * also counted under (workload, process, instruction pointer, caller) in
 * `call_sites`. The instruction pointer is where the system call instruction
 * is (the C library's stub, or the code that made the call itself: libgomp
 * inlines its futex calls). For sched_yield the caller is the return address
 * at the user stack pointer: every C library's sched_yield and syscall() are
 * leaf stubs that push nothing, so the word there is the return address into
 * the code that called them (the only word of a process's memory the program
 * reads). For a futex wait it is 0: the C library's futex paths are not
 * leaves, and one level up is the C library itself. The user registers are
 * the task's saved ones (bpf_task_pt_regs of the BTF-typed current task,
 * Linux 5.15), whose x86-64 layout is part of the user-space ABI
 * (PTRACE_GETREGS); the syscall tracepoint's own context carries the kernel's
 * registers there since 6.x, not the caller's.
 *
 * Reading a call's registers and the word at its stack pointer costs more
 * than the rest of the program (docs/benchmarks.md), so sites are counted
 * only for the workloads the agent chose (`site_workloads`: the busiest by
 * yields and futex waits at the last scrape, --code-workloads of them), and
 * for a workload first seen since then: each entry reads the choice again
 * only when the agent made a new one (`site_choice`, a generation), so the
 * other workloads' calls pay one comparison. A storm repeats one site: each
 * CPU keeps the last site it counted and its calls not yet added to
 * `call_sites` (`last_sites`, a slot per CPU), and adds them there only when a
 * call from another site arrives on that CPU, which saves the hash lookup of
 * every repeated call. The agent reads `call_sites` first, then `last_sites`
 * (a site's count is its entry plus the calls pending for it): a slot's
 * pending calls are set to 0 before they are added to the map, so a read
 * counts them once, or at the next read. Entries stay until the agent has
 * read them for the last time after their process exited; a site that finds
 * the map full is counted in drops[DROP_SITE_MAP]. A process whose sites are
 * counted is announced on `site_news` when a CPU first counts one of its sites
 * (`site_processes` remembers it until it exits), so that the agent reads its
 * maps while it lives: a process that exits within milliseconds is named too.
 *
 * Compile-time options (set by agent/probes/syscalls.py):
 *   MAX_CGROUPS, MAX_PROCESSES (0 turns per-process accounting off),
 *   MAX_THREADS, HAVE_GROUP_DEAD, HAVE_FUTEX_WAITV, HAVE_FUTEX_WAIT,
 *   HAVE_FUTEX_WAKE, HAVE_FUTEX_REQUEUE, PIDNS_DEV/PIDNS_INO in sidecar mode,
 *   KEY_BY_PROCESS on hosts without cgroup2 (see schedwatch.h), CALL_SITES
 *   with MAX_CALL_SITES, MAX_SITE_WORKLOADS and MAX_CPUS (the possible CPUs).
 */

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
    u32 sites_generation;  /* site_choice's generation when count_sites was last read, plus one; 0: never */
    u32 count_sites;       /* whether this workload's call sites are counted */
};

struct process_stats {
    u64 cgroup_id;  /* the workload key it last counted under */
    u64 yields;
    u64 futex_calls[FC_COUNT];
    u64 futex_wait_ns;
};

BPF_HASH(cgroups, u64, struct cgroup_stats, MAX_CGROUPS);
#define WORKLOAD_TOTALS struct cgroup_stats
#include "schedwatch.h"
#if MAX_PROCESSES > 0
BPF_HASH(processes, u32, struct process_stats, MAX_PROCESSES);
#endif
/* Thread id -> ktime at entry of the futex call in progress that may block
 * (0: none). Entries are deleted when the thread exits. */
BPF_HASH(futex_start, u32, u64, MAX_THREADS);

#ifdef CALL_SITES
enum site_kind { SITE_SCHED_YIELD = 0, SITE_FUTEX_WAIT = 1 };

/* What a site is counted under. */
struct site_key {
    u64 workload;
    u64 ip;       /* after the system call instruction */
    u64 caller;   /* sched_yield: the return address at the user stack pointer; futex: 0 */
    u32 tgid;
    u32 kind;     /* enum site_kind */
};

#define SITE_CACHE_PAD 3  /* u64s: a slot fills one 64-byte cache line */
/* A CPU's last site and its calls not yet in call_sites; a cache line each. */
struct site_cache {
    struct site_key site;
    u64 pending;
    u64 unused[SITE_CACHE_PAD];
};

/* The x86-64 struct pt_regs from ip on (offset 128 of 168). */
struct user_regs {
    u64 ip;
    u64 cs;
    u64 flags;
    u64 sp;
};
#define PT_REGS_IP_OFFSET 128

BPF_HASH(call_sites, struct site_key, u64, MAX_CALL_SITES);
BPF_ARRAY(last_sites, struct site_cache, MAX_CPUS);
BPF_ARRAY(site_choice, u32, 1);  /* written by the agent: a new generation with each new choice */
BPF_HASH(site_workloads, u64, u8, MAX_SITE_WORKLOADS);

/* Processes announced on `site_news` (tgid -> 1), deleted when they exit; the oldest are forgotten first. */
#define SITE_PROCESSES 4096
BPF_TABLE("lru_hash", u32, u8, site_processes, SITE_PROCESSES);
BPF_RINGBUF_OUTPUT(site_news, 16);  /* pages: 2,730 announcements of 16 bytes and their 8-byte headers */
struct site_news_record {
    u32 tgid;
    u32 unused;
    u64 boot_ns;
};

/* Tell the agent that process `tgid` has call sites, once while it lives (again if the ring was full). */
static __always_inline void announce_site_process(u32 tgid)
{
    u8 one = 1;
    if (site_processes.lookup(&tgid))
        return;
    if (site_processes.insert(&tgid, &one))
        return;  /* another CPU announced it first */
    struct site_news_record news = {.tgid = tgid, .boot_ns = bpf_ktime_get_boot_ns()};
    if (site_news.ringbuf_output(&news, sizeof(news), 0))
        site_processes.delete(&tgid);
}

/* Whether the call sites of workload `key` (entry `cg`) are counted: chosen by the agent, or new since its last
 * choice. */
static __always_inline bool sites_counted(struct cgroup_stats *cg, u64 key)
{
    u32 zero = 0;
    u32 *generation = site_choice.lookup(&zero);
    if (!generation)
        return false;
    u32 current = *generation + 1;
    if (cg->sites_generation != current) {
        cg->count_sites = cg->sites_generation == 0 || site_workloads.lookup(&key) != 0;
        cg->sites_generation = current;
    }
    return cg->count_sites;
}

static __always_inline void add_to_site(struct site_key *site, u64 calls)
{
    u64 *count = call_sites.lookup(site);
    if (count) {
        __sync_fetch_and_add(count, calls);
        return;
    }
    if (call_sites.insert(site, &calls) == 0)
        return;
    count = call_sites.lookup(site);  /* another CPU inserted it first, or the map is full */
    if (count) {
        __sync_fetch_and_add(count, calls);
        return;
    }
    u32 reason = DROP_SITE_MAP;
    u64 *dropped = drops.lookup(&reason);
    if (dropped)
        __sync_fetch_and_add(dropped, calls);
}

/* Count one call of kind `kind` of workload `key` at its call site. */
static __always_inline void count_site(u64 key, u32 kind)
{
    struct user_regs regs;
    void *user_regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
    if (bpf_probe_read_kernel(&regs, sizeof(regs), user_regs + PT_REGS_IP_OFFSET))
        return;
    struct site_key site = {.workload = key, .ip = regs.ip, .tgid = watched_tgid(), .kind = kind};
    if (kind == SITE_SCHED_YIELD)
        bpf_probe_read_user(&site.caller, sizeof(site.caller), (void *)regs.sp); /* 0 where unreadable */
    u32 cpu = bpf_get_smp_processor_id();
    struct site_cache *last = last_sites.lookup(&cpu);
    if (!last) {
        announce_site_process(site.tgid);
        add_to_site(&site, 1);
        return;
    }
    if (last->site.ip == site.ip && last->site.caller == site.caller && last->site.workload == site.workload &&
        last->site.tgid == site.tgid && last->site.kind == site.kind) {
        last->pending += 1;  /* only this CPU writes its slot, one program at a time */
        return;
    }
    if (last->site.tgid != site.tgid)  /* a process's own sites in turn pay nothing more */
        announce_site_process(site.tgid);
    /* In this order, with the compiler kept from reordering (x86-64 keeps stores in order): a reader never finds
     * the same calls both pending and in call_sites. */
    u64 pending = last->pending;
    last->pending = 0;
    asm volatile("" ::: "memory");
    if (pending)
        add_to_site(&last->site, pending);
    asm volatile("" ::: "memory");
    last->site = site;
    asm volatile("" ::: "memory");
    last->pending = 1;
}
#endif

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
    struct cgroup_stats *cg = workload_entry(key);
    if (cg)
        __sync_fetch_and_add(&cg->futex_calls[fclass], 1);
#if MAX_PROCESSES > 0
    struct process_stats *proc = process_entry(key);
    if (proc)
        __sync_fetch_and_add(&proc->futex_calls[fclass], 1);
#endif
    if (blocks) {
#ifdef CALL_SITES
        if (cg && sites_counted(cg, key))
            count_site(key, SITE_FUTEX_WAIT);
#endif
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
    struct cgroup_stats *cg = workload_entry(key);
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
    struct cgroup_stats *cg = workload_entry(key);
    if (cg)
        __sync_fetch_and_add(&cg->yields, 1);
#if MAX_PROCESSES > 0
    struct process_stats *proc = process_entry(key);
    if (proc)
        __sync_fetch_and_add(&proc->yields, 1);
#endif
#ifdef CALL_SITES
    if (cg && sites_counted(cg, key))
        count_site(key, SITE_SCHED_YIELD);
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

static __always_inline void forget_thread(u32 tid)
{
    futex_start.delete(&tid);
}

static __always_inline void process_exits(u32 tgid)
{
#ifdef CALL_SITES
    site_processes.delete(&tgid);
#endif
#if MAX_PROCESSES > 0
    processes.delete(&tgid);
#endif
}
