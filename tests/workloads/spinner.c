/* spinner CGROUP_DIRS THREADS SECONDS CPU HOLD
 * THREADS threads each burn CPU for SECONDS of wall time (all pinned to CPU, unless CPU is -1), then park
 * until released. Reports the thread ids while they are parked, so their schedstat can be read, and the main
 * thread's waits for a CPU counted before and after it joined the cgroup (the others start in it). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include "common.h"

static double seconds;
static pthread_barrier_t spun;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t released = PTHREAD_COND_INITIALIZER;
static int release_all;
static int tids[256];

static void *spin(void *slot)
{
    *(int *)slot = (int)syscall(SYS_gettid);
    double end = now() + seconds;
    volatile unsigned long sink = 0;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink += i;
    pthread_barrier_wait(&spun);
    pthread_mutex_lock(&lock);
    while (!release_all)
        pthread_cond_wait(&released, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: spinner CGROUP_DIRS THREADS SECONDS CPU HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    int threads = atoi(argv[2]);
    seconds = atof(argv[3]);
    int cpu = atoi(argv[4]);
    if (threads < 1 || threads > 256)
        return 2;
    pin_to_cpu(cpu); /* threads created below inherit it */
    pthread_barrier_init(&spun, NULL, threads + 1);
    pthread_t ids[256];
    for (int t = 0; t < threads; t++)
        pthread_create(&ids[t], NULL, spin, &tids[t]);
    pthread_barrier_wait(&spun);

    char json[4096];
    int length = snprintf(json, sizeof(json), "{\"pid\": %d, \"tids\": [%d", getpid(), getpid());
    for (int t = 0; t < threads; t++)
        length += snprintf(json + length, sizeof(json) - length, ", %d", tids[t]);
    snprintf(json + length, sizeof(json) - length, "], \"waits_before_join\": %llu, \"waits_after_join\": %llu}",
             waits_before_join, waits_after_join);
    report_and_hold(json, atoi(argv[5]));

    pthread_mutex_lock(&lock);
    release_all = 1;
    pthread_cond_broadcast(&released);
    pthread_mutex_unlock(&lock);
    for (int t = 0; t < threads; t++)
        pthread_join(ids[t], NULL);
    return 0;
}
