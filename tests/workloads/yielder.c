/* yielder CGROUP_DIR CALLS_PER_THREAD THREADS HOLD
 * Makes exactly CALLS_PER_THREAD * THREADS sched_yield(2) calls, then reports. */
#include <pthread.h>
#include <sys/syscall.h>
#include "common.h"

static long calls_per_thread;

static void *spin(void *unused)
{
    (void)unused;
    for (long i = 0; i < calls_per_thread; i++)
        syscall(SYS_sched_yield);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: yielder CGROUP_DIR CALLS_PER_THREAD THREADS HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    calls_per_thread = atol(argv[2]);
    int threads = atoi(argv[3]);
    pthread_t ids[256];
    if (threads < 1 || threads > 256)
        return 2;
    for (int t = 0; t < threads; t++) {
        int error = pthread_create(&ids[t], NULL, spin, NULL);
        if (error != 0) {
            fprintf(stderr, "yielder: pthread_create: %s\n", strerror(error));
            return 3;
        }
    }
    for (int t = 0; t < threads; t++)
        pthread_join(ids[t], NULL);
    char json[128];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"yields\": %ld}", getpid(), calls_per_thread * threads);
    report_and_hold(json, atoi(argv[4]));
    return 0;
}
