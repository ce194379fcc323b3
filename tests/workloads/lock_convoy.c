/* lock_convoy CGROUP_DIRS THREADS SECONDS INSIDE_US OUTSIDE_US
 * THREADS threads for SECONDS of wall time: each takes one shared pthread mutex, burns INSIDE_US of CPU holding it,
 * releases it and sleeps OUTSIDE_US (waiting for I/O, say). Long critical sections make a convoy: the threads queue on the mutex's futex.
 * Reports {"pid", "threads", "acquisitions", "seconds"} when done. */
#include <pthread.h>
#include <time.h>
#include "common.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static double seconds, inside, outside, started;
static long acquisitions;

static void burn(double length)
{
    double end = now() + length;
    volatile unsigned long sink = 0;
    while (now() < end)
        for (int i = 0; i < 100; i++)
            sink += i;
}

static void *work(void *unused)
{
    (void)unused;
    struct timespec pause = {(time_t)outside, (long)((outside - (time_t)outside) * 1e9)};
    while (now() < started + seconds) {
        pthread_mutex_lock(&lock);
        acquisitions++;
        burn(inside);
        pthread_mutex_unlock(&lock);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: lock_convoy CGROUP_DIRS THREADS SECONDS INSIDE_US OUTSIDE_US\n");
        return 2;
    }
    join_cgroup(argv[1]);
    int threads = atoi(argv[2]);
    pthread_t ids[256];
    if (threads < 1 || threads > 256) {
        fprintf(stderr, "THREADS must be 1..256\n");
        return 2;
    }
    seconds = atof(argv[3]);
    inside = atof(argv[4]) / 1e6;
    outside = atof(argv[5]) / 1e6;
    started = now();
    for (int i = 0; i < threads; i++)
        pthread_create(&ids[i], NULL, work, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    char json[256];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"threads\": %d, \"acquisitions\": %ld, \"seconds\": %.3f}", getpid(), threads,
           acquisitions, now() - started);
    report_and_hold(json, 0);
    return 0;
}
