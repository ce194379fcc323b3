/* bench/site_parts.py: the call-site count of bpf/syscalls.bpf.c on sched_yield built up one part at a time (PARTS =
 * 0..3), each level doing what the level below does and one more part, so that the difference between two levels
 * is what that part costs (x86-64):
 *   0  the yield counted in its workload's totals (a hash lookup keyed by cgroup id and an atomic add): what every
 *      yield pays with call sites not counted
 *   1  + the caller's saved user registers (bpf_task_pt_regs of the BTF-typed current task, 32 bytes copied with
 *      bpf_probe_read_kernel, as syscalls.bpf.c does)
 *   2  + the return address at the user stack pointer (8 bytes with bpf_probe_read_user)
 *   3  + the per-CPU last-site slot: process id, the site compared with the CPU's last one, one more call pending
 * With DIRECT_REGS, level 1 and up read the two registers with plain loads from the BTF-typed pt_regs instead of
 * the copy (the verifier makes each a fault-safe load).
 */
#include "bpf/schedwatch.h"  /* relative to the checkout: the benchmark runs there */

struct site_key {
    u64 workload;
    u64 ip;
    u64 caller;
    u32 tgid;
    u32 kind;
};

struct site_cache {
    struct site_key site;
    u64 pending;
    u64 unused[3];
};

BPF_HASH(totals, u64, u64, MAX_CGROUPS);
BPF_ARRAY(last_sites, struct site_cache, MAX_CPUS);

#define PT_REGS_IP_OFFSET 128
#define PT_REGS_SP_OFFSET 152

TRACEPOINT_PROBE(syscalls, sys_enter_sched_yield)
{
    u64 key = bpf_get_current_cgroup_id();
    u64 *count = totals.lookup(&key);
    if (!count) {
        u64 zero = 0;
        totals.insert(&key, &zero);
        count = totals.lookup(&key);
    }
    if (count)
        __sync_fetch_and_add(count, 1);
#if PARTS >= 1
    struct site_key site = {.workload = key};
    u64 sp = 0;
    void *user_regs = (void *)bpf_task_pt_regs(bpf_get_current_task_btf());
#ifdef DIRECT_REGS
    site.ip = *(u64 *)(user_regs + PT_REGS_IP_OFFSET);
    sp = *(u64 *)(user_regs + PT_REGS_SP_OFFSET);
#else
    u64 regs[4];
    if (bpf_probe_read_kernel(regs, sizeof(regs), user_regs + PT_REGS_IP_OFFSET))
        return KEEP_EVENT;
    site.ip = regs[0];
    sp = regs[3];
#endif
#if PARTS >= 2
    bpf_probe_read_user(&site.caller, sizeof(site.caller), (void *)sp);
#endif
#if PARTS >= 3
    site.tgid = bpf_get_current_pid_tgid() >> 32;
    u32 cpu = bpf_get_smp_processor_id();
    struct site_cache *last = last_sites.lookup(&cpu);
    if (!last)
        return KEEP_EVENT;
    if (last->site.ip == site.ip && last->site.caller == site.caller && last->site.workload == site.workload &&
        last->site.tgid == site.tgid && last->site.kind == site.kind) {
        last->pending += 1;
        return KEEP_EVENT;
    }
    last->site = site;
    last->pending = 1;
#else
    if (count && site.ip == 1 && sp == 1)  /* keeps the reads */
        __sync_fetch_and_add(count, 0);
#endif
#endif
    return KEEP_EVENT;
}
