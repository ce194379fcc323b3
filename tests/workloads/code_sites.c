/* code_sites CGROUP_DIR ALPHA BETA GAMMA DELTA HOLD
 * Makes exactly ALPHA sched_yield(2) calls from yield_from_alpha (through the C library's sched_yield), BETA from
 * yield_from_beta (through syscall(SYS_sched_yield)), GAMMA futex waits from wait_from_gamma (through syscall(),
 * so made in the C library) and DELTA from wait_inline_delta (its own syscall instruction, as libgomp's are). Each
 * wait is FUTEX_WAIT on a word that does not hold the expected value: it returns EAGAIN at once. Then sleeps
 * CODE_SITES_LINGER_MS milliseconds if that is set (the life a short-lived process is promised to be named in), and
 * reports. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include "common.h"

static int futex_word = 1;

__attribute__((noinline)) void yield_from_alpha(long calls)
{
    for (long i = 0; i < calls; i++)
        sched_yield();
}

__attribute__((noinline)) void yield_from_beta(long calls)
{
    for (long i = 0; i < calls; i++)
        syscall(SYS_sched_yield);
}

__attribute__((noinline)) void wait_from_gamma(long calls)
{
    for (long i = 0; i < calls; i++)
        syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
}

__attribute__((noinline)) void wait_inline_delta(long calls)
{
    for (long i = 0; i < calls; i++) {
        long result;
        register long timeout __asm__("r10") = 0;
        __asm__ volatile("syscall"
                         : "=a"(result)
                         : "0"((long)SYS_futex), "D"(&futex_word), "S"((long)FUTEX_WAIT_PRIVATE), "d"(0L),
                           "r"(timeout)
                         : "rcx", "r11", "memory");
        (void)result;
    }
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: code_sites CGROUP_DIR ALPHA BETA GAMMA DELTA HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    long alpha = atol(argv[2]), beta = atol(argv[3]), gamma = atol(argv[4]), delta = atol(argv[5]);
    yield_from_alpha(alpha);
    yield_from_beta(beta);
    wait_from_gamma(gamma);
    wait_inline_delta(delta);
    const char *linger = getenv("CODE_SITES_LINGER_MS");
    if (linger != NULL) {
        struct timespec pause = {0, atol(linger) * 1000000L};
        nanosleep(&pause, NULL);
    }
    char json[256];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"alpha\": %ld, \"beta\": %ld, \"gamma\": %ld, \"delta\": %ld}",
             getpid(), alpha, beta, gamma, delta);
    report_and_hold(json, atoi(argv[6]));
    return 0;
}
