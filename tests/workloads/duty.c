/* duty CGROUP_DIRS SECONDS THREADS CPU BUSY_US IDLE_US
 * THREADS threads pinned to CPU (-1: not pinned) each compute for BUSY_US of wall time, then sleep IDLE_US (0: never
 * sleep: a CPU hog), for SECONDS of wall time, as a service thread answering requests does. Two of these on one CPU,
 * in two workloads, make a noisy neighbour: the hogs hold the CPU while the other's thread waits for it. The clock is
 * read through the vDSO only (a thread CPU clock would be a system call per read). Reports the rounds made. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include "common.h"

static double deadline;
static long busy_us, idle_us;
static atomic_long rounds;

static void *work(void *unused)
{
    (void)unused;
    volatile unsigned long sink = 0;
    struct timespec nap = {.tv_sec = idle_us / 1000000, .tv_nsec = (idle_us % 1000000) * 1000};
    while (now() < deadline) {
        double until = now() + busy_us / 1e6;
        while (now() < until)
            for (int j = 0; j < 1000; j++)
                sink += j;
        atomic_fetch_add(&rounds, 1);
        if (idle_us > 0)
            nanosleep(&nap, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: duty CGROUP_DIRS SECONDS THREADS CPU BUSY_US IDLE_US\n");
        return 2;
    }
    join_cgroup(argv[1]);
    deadline = now() + atof(argv[2]);
    int threads = atoi(argv[3]);
    pin_to_cpu(atoi(argv[4])); /* threads created below inherit it */
    busy_us = atol(argv[5]);
    idle_us = atol(argv[6]);
    if (threads < 1 || threads > 64 || busy_us < 1)
        return 2;
    pthread_t ids[64];
    for (int i = 0; i < threads; i++)
        if (pthread_create(&ids[i], NULL, work, NULL) != 0)
            return 3;
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    char json[128];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"rounds\": %ld}", getpid(), atomic_load(&rounds));
    report_and_hold(json, 0);
    return 0;
}
