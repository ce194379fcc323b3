/* code_spinner CGROUP_DIR SECONDS HOLD
 * Two threads for SECONDS of wall time. The first alternates spin_alpha and spin_beta, each for 3 ms of its own CPU
 * time (CLOCK_THREAD_CPUTIME_ID) at a time; the second spins in spin_half for 6 ms of wall time, then sleeps 6 ms:
 * on the CPU about half of the time. Reports the CPU nanoseconds spent in each function. */
#define _GNU_SOURCE
#include <pthread.h>
#include "common.h"

static double seconds;
static volatile unsigned long sink;
static long long alpha_ns, beta_ns, half_ns;

static long long thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Spin until this thread has used `ns` more nanoseconds of CPU; how many it used. */
__attribute__((noinline)) long long spin_alpha(long long ns)
{
    long long start = thread_ns(), used;
    while ((used = thread_ns() - start) < ns)
        for (int i = 0; i < 200000; i++)
            sink += i;
    return used;
}

__attribute__((noinline)) long long spin_beta(long long ns)
{
    long long start = thread_ns(), used;
    while ((used = thread_ns() - start) < ns)
        for (int i = 0; i < 200000; i++)
            sink ^= i;
    return used;
}

/* Spin for `wall` seconds of wall time; the CPU nanoseconds it used. */
__attribute__((noinline)) long long spin_half(double wall)
{
    long long start = thread_ns();
    double end = now() + wall;
    while (now() < end)
        for (int i = 0; i < 20000; i++) /* short: the spin overshoots `wall` by at most one round */
            sink += i * 3;
    return thread_ns() - start;
}

static void *alternate(void *unused)
{
    (void)unused;
    double end = now() + seconds;
    while (now() < end) {
        alpha_ns += spin_alpha(3000000);
        beta_ns += spin_beta(3000000);
    }
    return NULL;
}

static void *half(void *unused)
{
    (void)unused;
    double end = now() + seconds;
    struct timespec pause = {0, 6000000};
    while (now() < end) {
        half_ns += spin_half(0.006);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: code_spinner CGROUP_DIR SECONDS HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    seconds = atof(argv[2]);
    pthread_t first, second;
    double start = now();
    pthread_create(&first, NULL, alternate, NULL);
    pthread_create(&second, NULL, half, NULL);
    pthread_join(first, NULL);
    pthread_join(second, NULL);
    char json[256];
    snprintf(json, sizeof(json),
             "{\"pid\": %d, \"alpha_ns\": %lld, \"beta_ns\": %lld, \"half_ns\": %lld, \"wall_ns\": %lld}", getpid(),
             alpha_ns, beta_ns, half_ns, (long long)((now() - start) * 1e9));
    report_and_hold(json, atoi(argv[3]));
    return 0;
}
