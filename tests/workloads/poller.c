/* poller CGROUP_DIRS SECONDS THREADS MODE MICROSECONDS
 * THREADS idle worker threads wait for work that comes 100 times a second (a producer thread), for SECONDS of
 * wall time. MODE "sleep": each worker polls a flag with nanosleep(MICROSECONDS) between looks, as a loop with
 * usleep(50) does; "epoll": each worker waits in epoll_wait on an eventfd with a timeout of MICROSECONDS (rounded
 * down to whole milliseconds: 0 makes it return at once); "block": each worker blocks in read(2) on its eventfd
 * until the producer writes it (the fix: block on the event). Reports the work items taken and the wake-ups. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include "common.h"

enum mode { SLEEP, EPOLL, BLOCK };
#define MAX_THREADS 64

static enum mode mode;
static long micros;
static double deadline;
static atomic_long pending[MAX_THREADS], taken, wakeups;
static int events[MAX_THREADS];

static void *worker(void *arg)
{
    long index = (long)arg;
    int epoll = -1;
    if (mode == EPOLL) {
        epoll = epoll_create1(0);
        struct epoll_event interest = {.events = EPOLLIN};
        if (epoll < 0 || epoll_ctl(epoll, EPOLL_CTL_ADD, events[index], &interest) != 0)
            exit(3);
    }
    struct timespec nap = {.tv_sec = micros / 1000000, .tv_nsec = (micros % 1000000) * 1000};
    uint64_t value;
    struct epoll_event ready;
    while (now() < deadline) {
        if (mode == SLEEP) {
            nanosleep(&nap, NULL);
        } else if (mode == EPOLL) {
            if (epoll_wait(epoll, &ready, 1, (int)(micros / 1000)) == 1 && read(events[index], &value, 8) != 8)
                exit(3);
        } else if (read(events[index], &value, 8) != 8) {
            exit(3);
        }
        atomic_fetch_add(&wakeups, 1);
        long work = atomic_exchange(&pending[index], 0);
        atomic_fetch_add(&taken, work);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: poller CGROUP_DIRS SECONDS THREADS sleep|epoll|block MICROSECONDS\n");
        return 2;
    }
    join_cgroup(argv[1]);
    deadline = now() + atof(argv[2]);
    int threads = atoi(argv[3]);
    mode = strcmp(argv[4], "sleep") == 0 ? SLEEP : strcmp(argv[4], "epoll") == 0 ? EPOLL : BLOCK;
    micros = atol(argv[5]);
    if (threads < 1 || threads > MAX_THREADS)
        return 2;
    pthread_t ids[MAX_THREADS];
    for (long i = 0; i < threads; i++) {
        events[i] = eventfd(0, mode == EPOLL ? EFD_NONBLOCK : 0);
        if (events[i] < 0 || pthread_create(&ids[i], NULL, worker, (void *)i) != 0)
            return 3;
    }
    /* The producer: one item for each worker every 10 ms, written to its eventfd too (the sleepers ignore it),
     * and a last write after the deadline so that blocked readers wake and end. */
    struct timespec tick = {.tv_sec = 0, .tv_nsec = 10000000};
    uint64_t one = 1;
    long produced = 0;
    while (now() < deadline) {
        nanosleep(&tick, NULL);
        for (int i = 0; i < threads; i++) {
            atomic_fetch_add(&pending[i], 1);
            if (mode != SLEEP && write(events[i], &one, 8) != 8)
                return 3;
            produced++;
        }
    }
    for (int i = 0; i < threads; i++)
        if (mode == BLOCK && write(events[i], &one, 8) != 8)
            return 3;
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    char json[192];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"produced\": %ld, \"taken\": %ld, \"wakeups\": %ld}", getpid(),
             produced, atomic_load(&taken), atomic_load(&wakeups));
    report_and_hold(json, 0);
    return 0;
}
