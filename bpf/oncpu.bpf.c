/* On-CPU samples per workload: where the interrupted thread was, by address.
 *
 * A perf_event program on a software cpu-clock event of every CPU (it needs no hardware PMU), fired SAMPLE_HZ times
 * a second per CPU by the timer. Each sample counts one in `samples` under (workload key, process, address, mode):
 * the user instruction pointer when the thread ran user code, the kernel's when it ran kernel code. The idle task is
 * not counted. Constant work per sample (one hash lookup and an atomic add, one insert for a new address), nothing
 * sent to user space: the agent reads and empties the map at scrape time (BPF_MAP_LOOKUP_AND_DELETE_BATCH), maps
 * each address to its library (/proc/PID/maps) and function (the library's symbol table), and keeps the totals.
 * The map holds at most MAX_SAMPLE_SLOTS addresses between two reads; a sample that finds it full is counted in
 * drops[DROP_SITE_MAP].
 *
 * The program owns its perf event (nobody else reads it), so it returns 0: the kernel then writes no perf sample
 * record, which nobody would read.
 *
 * Compile-time options (agent/bpf/probes/oncpu.py): MAX_SAMPLE_SLOTS, PIDNS_DEV/PIDNS_INO in sidecar mode,
 * KEY_BY_PROCESS (see schedwatch.h).
 */
#include <uapi/linux/bpf_perf_event.h>
#define COUNT_DROPS
#include "schedwatch.h"

struct sample_key {
    u64 workload;   /* workload_key(): cgroup id, or the process */
    u64 address;    /* instruction pointer: user or kernel */
    u32 tgid;       /* whose address space a user address is in */
    u32 kernel;     /* 1: the thread was running kernel code */
};

BPF_HASH(samples, struct sample_key, u64, MAX_SAMPLE_SLOTS);

int on_cpu_sample(struct bpf_perf_event_data *ctx)
{
    u32 tgid = watched_tgid();
    if (tgid == 0) /* the idle task, or a task outside the watched pid namespace */
        return 0;
    u64 address = PT_REGS_IP(&ctx->regs);
    struct sample_key key = {
        .workload = workload_key(),
        .address = address,
        .tgid = tgid,
        .kernel = address >> 63, /* kernel addresses have the top bit set (x86-64, arm64) */
    };
    u64 *count = samples.lookup(&key);
    if (count) {
        __sync_fetch_and_add(count, 1);
        return 0;
    }
    u64 one = 1;
    if (samples.insert(&key, &one) == 0)
        return 0;
    count = samples.lookup(&key); /* another CPU inserted it first, or the map is full */
    if (count)
        __sync_fetch_and_add(count, 1);
    else
        count_drop(DROP_SITE_MAP);
    return 0;
}
