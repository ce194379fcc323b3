/* budget CGROUP_DIRS CPU THREADS SPIN_SECONDS SLEEPS SLEEP_NS VFORKS HOLD
 * The main thread and THREADS more (all pinned to CPU, unless CPU is -1) each: spin for SPIN_SECONDS of wall time,
 * sleep SLEEPS times for SLEEP_NS (interruptible), then vfork VFORKS times, each child sleeping SLEEP_NS before it
 * exits (the parent waits uninterruptibly, D, while its child lives). Reports what it measured around each part,
 * and each thread's life: from just before it was made to the end of its work (the main thread's, main_life_ns,
 * from after joining the cgroup to after joining its threads): the time budget's ground truth. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "common.h"

#define MAX_THREADS 64

struct part {
    int tid;
    uint64_t born_ns; /* the main thread's clock just before it made this thread (0: the main thread itself) */
    uint64_t life_ns, slept_ns, vfork_ns;
};

static double spin_seconds;
static long sleeps, vforks;
static uint64_t sleep_ns;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void work(struct part *part)
{
    uint64_t start = now_ns();
    part->tid = (int)syscall(SYS_gettid);
    volatile unsigned long sink = 0;
    uint64_t end = start + (uint64_t)(spin_seconds * 1e9);
    while (now_ns() < end)
        for (int i = 0; i < 10000; i++)
            sink += i;
    struct timespec ts = {.tv_sec = sleep_ns / 1000000000ull, .tv_nsec = sleep_ns % 1000000000ull};
    for (long i = 0; i < sleeps; i++) {
        uint64_t before = now_ns();
        nanosleep(&ts, NULL);
        part->slept_ns += now_ns() - before;
    }
    for (long i = 0; i < vforks; i++) {
        uint64_t before = now_ns();
        pid_t child = vfork();
        if (child == 0) {
            nanosleep(&ts, NULL);
            _exit(0);
        }
        if (child < 0) {
            perror("vfork");
            exit(2);
        }
        waitpid(child, NULL, 0);
        part->vfork_ns += now_ns() - before;
    }
    part->life_ns = now_ns() - (part->born_ns ? part->born_ns : start);
}

static void *run(void *part)
{
    work(part);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 9) {
        fprintf(stderr, "usage: budget CGROUP_DIRS CPU THREADS SPIN_SECONDS SLEEPS SLEEP_NS VFORKS HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    uint64_t start = now_ns();
    int cpu = atoi(argv[2]), threads = atoi(argv[3]);
    spin_seconds = atof(argv[4]);
    sleeps = atol(argv[5]);
    sleep_ns = strtoull(argv[6], NULL, 10);
    vforks = atol(argv[7]);
    if (threads < 0 || threads > MAX_THREADS)
        return 2;
    pin_to_cpu(cpu); /* threads created below inherit it */
    static struct part parts[MAX_THREADS + 1];
    pthread_t ids[MAX_THREADS];
    for (int t = 0; t < threads; t++) {
        parts[t + 1].born_ns = now_ns();
        pthread_create(&ids[t], NULL, run, &parts[t + 1]);
    }
    work(&parts[0]);
    for (int t = 0; t < threads; t++)
        pthread_join(ids[t], NULL);
    uint64_t main_life = now_ns() - start;

    char json[8192];
    int length = snprintf(json, sizeof(json), "{\"pid\": %d, \"main_life_ns\": %llu, \"parts\": [", getpid(),
                          (unsigned long long)main_life);
    for (int t = 0; t <= threads; t++)
        length += snprintf(json + length, sizeof(json) - length,
                           "%s{\"tid\": %d, \"life_ns\": %llu, \"slept_ns\": %llu, \"vfork_ns\": %llu}", t ? ", " : "",
                           parts[t].tid, (unsigned long long)parts[t].life_ns, (unsigned long long)parts[t].slept_ns,
                           (unsigned long long)parts[t].vfork_ns);
    snprintf(json + length, sizeof(json) - length, "]}");
    report_and_hold(json, atoi(argv[8]));
    return 0;
}
