/* exiter CGROUP_DIR THREADS SECONDS CPU HOLD
 * Reports its pid and waits until stdin closes (HOLD 1); then starts THREADS threads pinned to CPU that burn
 * CPU for SECONDS of wall time and exit, each reading its own schedstat as its last act, and exits itself.
 * The second line it prints is the ground truth of the threads that lived and died after the release:
 * the sum of their schedstat run and run-queue wait ns, and the main thread's own at the end. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include "common.h"

static double seconds;
static unsigned long long run_ns[256], wait_ns[256];

static void own_schedstat(unsigned long long *run, unsigned long long *wait)
{
    FILE *file = fopen("/proc/thread-self/schedstat", "r");
    if (!file || fscanf(file, "%llu %llu", run, wait) != 2)
        exit(4);
    fclose(file);
}

static void *burn(void *slot)
{
    long index = (long)slot;
    double end = now() + seconds;
    volatile unsigned long sink = 0;
    while (now() < end)
        for (int i = 0; i < 10000; i++)
            sink += i;
    own_schedstat(&run_ns[index], &wait_ns[index]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: exiter CGROUP_DIR THREADS SECONDS CPU HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    int threads = atoi(argv[2]);
    seconds = atof(argv[3]);
    int cpu = atoi(argv[4]);
    if (threads < 1 || threads > 256)
        return 2;
    char json[256];
    snprintf(json, sizeof(json), "{\"pid\": %d}", getpid());
    report_and_hold(json, atoi(argv[5]));
    pin_to_cpu(cpu); /* threads created below inherit it */
    unsigned long long main_run0, main_wait0;
    own_schedstat(&main_run0, &main_wait0);
    pthread_t ids[256];
    for (long t = 0; t < threads; t++)
        pthread_create(&ids[t], NULL, burn, (void *)t);
    unsigned long long run = 0, wait = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ids[t], NULL);
        run += run_ns[t];
        wait += wait_ns[t];
    }
    unsigned long long main_run, main_wait;
    own_schedstat(&main_run, &main_wait);
    printf("{\"threads_run_ns\": %llu, \"threads_wait_ns\": %llu, \"main_run_ns\": %llu, \"main_wait_ns\": %llu,"
           " \"main_run_before_ns\": %llu, \"main_wait_before_ns\": %llu}\n",
           run, wait, main_run, main_wait, main_run0, main_wait0);
    fflush(stdout);
    return 0;
}
