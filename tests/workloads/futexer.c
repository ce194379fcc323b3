/* futexer CGROUP_DIR WAITS WAIT_NS WAKES HOLD
 * Single-threaded, raw syscalls only, so every futex call is one this program chose:
 *   WAITS timed waits of WAIT_NS each, spread over FUTEX_WAIT, FUTEX_WAIT_BITSET|CLOCK_REALTIME,
 *     futex_waitv(2) and futex2 futex_wait(2) (all time out: nobody wakes them);
 *   WAKES wakes spread over FUTEX_WAKE, FUTEX_WAKE_OP and futex2 futex_wake(2);
 *   plus 3 requeue (CMP_REQUEUE, REQUEUE, futex2 futex_requeue), 2 lock_pi (UNLOCK_PI, TRYLOCK_PI
 *   on a word it does not own / that is taken), 1 other (the removed FUTEX_FD).
 * Reports per-class counts, the wait time measured around each call and how many waits took 100 ms or more
 * (a loaded machine wakes a timed-out waiter late; the kernel-side histogram must agree with that).
 * A kernel without futex2's futex_wait/wake/requeue (before Linux 6.7: ENOSYS, no futex call at all) has those
 * calls left out of every count, and says so ("futex2": 0). */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include "common.h"

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif
#define NR_futex_wake 454
#define NR_futex_wait 455
#define NR_futex_requeue 456
#define FUTEX2_SIZE_U32 0x02
#define FUTEX2_PRIVATE 128

struct waitv {
    uint64_t val;
    uint64_t uaddr;
    uint32_t flags;
    uint32_t reserved;
};

static uint32_t word, other_word, pi_word = 1; /* pi_word "owned" by tid 1 */

static uint64_t now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static struct timespec ts_of(uint64_t ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000ull, .tv_nsec = ns % 1000000000ull};
    return ts;
}

static long timed_wait(int kind, uint64_t wait_ns)
{
    struct timespec ts;
    switch (kind) {
    case 0: /* FUTEX_WAIT, relative timeout */
        ts = ts_of(wait_ns);
        return syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    case 1: /* FUTEX_WAIT_BITSET with CLOCK_REALTIME, absolute timeout */
        ts = ts_of(now_ns(CLOCK_REALTIME) + wait_ns);
        return syscall(SYS_futex, &word, FUTEX_WAIT_BITSET_PRIVATE | FUTEX_CLOCK_REALTIME, 0, &ts, NULL,
                       FUTEX_BITSET_MATCH_ANY);
    case 2: { /* futex_waitv, absolute CLOCK_MONOTONIC timeout */
        struct waitv w = {.val = 0, .uaddr = (uintptr_t)&word, .flags = FUTEX2_SIZE_U32 | FUTEX2_PRIVATE};
        ts = ts_of(now_ns(CLOCK_MONOTONIC) + wait_ns);
        return syscall(SYS_futex_waitv, &w, 1, 0, &ts, CLOCK_MONOTONIC);
    }
    default: /* futex2 futex_wait, absolute CLOCK_MONOTONIC timeout */
        ts = ts_of(now_ns(CLOCK_MONOTONIC) + wait_ns);
        return syscall(NR_futex_wait, &word, 0, 0xfffffffful, FUTEX2_SIZE_U32 | FUTEX2_PRIVATE, &ts, CLOCK_MONOTONIC);
    }
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: futexer CGROUP_DIR WAITS WAIT_NS WAKES HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    long waits = atol(argv[2]), wakes = atol(argv[4]);
    uint64_t wait_ns = strtoull(argv[3], NULL, 10);
    long classic_waits = 0, waitv = 0, wait_errors = 0, slow_waits = 0, wakes_made = 0, requeues = 2;
    int futex2 = 1;
    uint64_t waited_ns = 0;

    for (long i = 0; i < waits; i++) {
        int kind = i % 4;
        uint64_t start = now_ns(CLOCK_MONOTONIC);
        long rc = timed_wait(kind, wait_ns);
        uint64_t took = now_ns(CLOCK_MONOTONIC) - start;
        if (kind == 3 && rc == -1 && errno == ENOSYS) {
            futex2 = 0; /* no such system call here: not a futex call */
            continue;
        }
        waited_ns += took;
        if (took >= 100000000ull)
            slow_waits++;
        if (rc != -1 || errno != ETIMEDOUT)
            wait_errors++;
        if (kind == 2)
            waitv++;
        else
            classic_waits++;
    }
    for (long i = 0; i < wakes; i++) {
        switch (i % 3) {
        case 0:
            syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
            break;
        case 1:
            syscall(SYS_futex, &word, FUTEX_WAKE_OP_PRIVATE, 1, NULL, &other_word,
                    FUTEX_OP(FUTEX_OP_ADD, 0, FUTEX_OP_CMP_EQ, 0));
            break;
        default:
            if (syscall(NR_futex_wake, &word, 0xfffffffful, 1, FUTEX2_SIZE_U32 | FUTEX2_PRIVATE) == -1 &&
                errno == ENOSYS) {
                futex2 = 0;
                continue;
            }
        }
        wakes_made++;
    }
    /* requeue: nobody waits, so each returns 0 (or EAGAIN); the call is what counts. */
    syscall(SYS_futex, &word, FUTEX_CMP_REQUEUE_PRIVATE, 1, (void *)1, &other_word, 0);
    syscall(SYS_futex, &word, FUTEX_REQUEUE_PRIVATE, 1, (void *)1, &other_word, 0);
    struct waitv pair[2] = {
        {.val = 0, .uaddr = (uintptr_t)&word, .flags = FUTEX2_SIZE_U32 | FUTEX2_PRIVATE},
        {.val = 0, .uaddr = (uintptr_t)&other_word, .flags = FUTEX2_SIZE_U32 | FUTEX2_PRIVATE},
    };
    if (syscall(NR_futex_requeue, pair, 0, 1, 1) == -1 && errno == ENOSYS)
        futex2 = 0;
    else
        requeues++;
    /* lock_pi class without blocking: unlock a word we do not own (EPERM), trylock a taken one. */
    syscall(SYS_futex, &pi_word, FUTEX_UNLOCK_PI_PRIVATE, 0, NULL, NULL, 0);
    syscall(SYS_futex, &pi_word, FUTEX_TRYLOCK_PI_PRIVATE, 0, NULL, NULL, 0);
    /* other: FUTEX_FD (op 2) was removed from the kernel long ago; ENOSYS, still a futex call. */
    syscall(SYS_futex, &word, 2, 0, NULL, NULL, 0);

    char json[512];
    snprintf(json, sizeof(json),
             "{\"pid\": %d, \"wait\": %ld, \"waitv\": %ld, \"wake\": %ld, \"requeue\": %ld, \"lock_pi\": 2, "
             "\"other\": 1, \"waited_ns\": %llu, \"wait_errors\": %ld, \"slow_waits\": %ld, \"futex2\": %d}",
             getpid(), classic_waits, waitv, wakes_made, requeues, (unsigned long long)waited_ns, wait_errors,
             slow_waits, futex2);
    report_and_hold(json, atoi(argv[5]));
    return 0;
}
