/* threader CGROUP_DIR THREADS CALLS_PER_THREAD HOLD
 * Starts THREADS threads (small stacks, so that tens of thousands fit), each makes exactly CALLS_PER_THREAD
 * sched_yield(2) calls; once all have, reports with every thread still alive, blocked until released. */
#include <pthread.h>
#include <sys/syscall.h>
#include "common.h"

static long calls_per_thread;
static long finished, threads_total;
static int released;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_finished = PTHREAD_COND_INITIALIZER; /* main waits on it */
static pthread_cond_t go = PTHREAD_COND_INITIALIZER;           /* the threads wait on it */

static void *work(void *unused)
{
    (void)unused;
    for (long i = 0; i < calls_per_thread; i++)
        syscall(SYS_sched_yield);
    pthread_mutex_lock(&lock);
    if (++finished == threads_total)
        pthread_cond_signal(&all_finished);
    while (!released)
        pthread_cond_wait(&go, &lock);
    pthread_mutex_unlock(&lock);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: threader CGROUP_DIR THREADS CALLS_PER_THREAD HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    long threads = threads_total = atol(argv[2]);
    calls_per_thread = atol(argv[3]);
    if (threads < 1 || threads > 100000)
        return 2;
    pthread_t *ids = calloc((size_t)threads, sizeof(*ids));
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    for (long t = 0; t < threads; t++) {
        int error = pthread_create(&ids[t], &attr, work, NULL);
        if (error) {
            fprintf(stderr, "pthread_create %ld: %s\n", t, strerror(error));
            return 3;
        }
    }
    pthread_mutex_lock(&lock);
    while (finished < threads)
        pthread_cond_wait(&all_finished, &lock);
    pthread_mutex_unlock(&lock);
    char json[160];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"threads\": %ld, \"yields\": %ld}", getpid(), threads + 1,
             threads * calls_per_thread);
    report_and_hold(json, atoi(argv[4]));
    pthread_mutex_lock(&lock);
    released = 1;
    pthread_cond_broadcast(&go);
    pthread_mutex_unlock(&lock);
    for (long t = 0; t < threads; t++)
        pthread_join(ids[t], NULL);
    free(ids);
    return 0;
}
