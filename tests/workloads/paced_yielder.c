/* paced_yielder CGROUP_DIR YIELDS_PER_MS HOLD
 * One thread makes YIELDS_PER_MS sched_yield(2) calls at each millisecond of CLOCK_MONOTONIC (absolute deadlines, so a
 * late tick catches up): YIELDS_PER_MS * 1000 calls per second, until stdin closes. Reports before it starts. */
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include "common.h"

static long per_ms;

static void *paced(void *unused)
{
    (void)unused;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (;;) {
        next.tv_nsec += 1000000;
        if (next.tv_nsec >= 1000000000) {
            next.tv_nsec -= 1000000000;
            next.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        for (long i = 0; i < per_ms; i++)
            syscall(SYS_sched_yield);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: paced_yielder CGROUP_DIR YIELDS_PER_MS HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    per_ms = atol(argv[2]);
    pthread_t id;
    int error = pthread_create(&id, NULL, paced, NULL);
    if (error != 0) {
        fprintf(stderr, "paced_yielder: pthread_create: %s\n", strerror(error));
        return 3;
    }
    char json[128];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"yields_per_second\": %ld}", getpid(), per_ms * 1000);
    report_and_hold(json, atoi(argv[3]));
    return 0;
}
