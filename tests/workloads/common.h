/* Shared by the test workloads: join a cgroup, report, wait to be released, read the clock, pin to a CPU. */
#ifndef WORKLOAD_COMMON_H
#define WORKLOAD_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The kernel's count of this thread's waits for a CPU: the times it was given one after waiting on a run
 * queue (the third field of its schedstat; Linux >= 5.14 counts nothing else there). */
static unsigned long long thread_waits(void)
{
    unsigned long long on_cpu_ns, waited_ns, waits;
    FILE *schedstat = fopen("/proc/thread-self/schedstat", "r");
    if (!schedstat || fscanf(schedstat, "%llu %llu %llu", &on_cpu_ns, &waited_ns, &waits) != 3) {
        perror("/proc/thread-self/schedstat");
        exit(2);
    }
    fclose(schedstat);
    return waits;
}

/* The joining thread's waits (thread_waits) just before and just after join_cgroup moved it: its waits before
 * are counted in the cgroup it came from (an exec from a slow filesystem waits many times), and one that ended
 * while it moved may be counted in either. */
static unsigned long long waits_before_join, waits_after_join;
/* CLOCK_BOOTTIME when join_cgroup was done: with the process's start time (/proc/PID/stat), how long it lived
 * before it joined (where the kernel keys counts by process, that life is counted in the cgroup it joined). */
static unsigned long long joined_at_ns;

/* Move this process into each cgroup directory of the ':'-separated `dirs` (cgroup2 and, on hybrid
 * hosts, v1 hierarchies such as cpu) before doing anything measured. "-" stays put (in a container). */
static void join_cgroup(const char *dirs)
{
    char list[4096], path[4200];
    waits_before_join = thread_waits();
    waits_after_join = waits_before_join;
    if (strcmp(dirs, "-") == 0)
        return;
    snprintf(list, sizeof(list), "%s", dirs);
    for (char *dir = strtok(list, ":"); dir; dir = strtok(NULL, ":")) {
        snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
        FILE *procs = fopen(path, "w");
        if (!procs || fprintf(procs, "%d\n", getpid()) < 0 || fclose(procs) != 0) {
            perror(path);
            exit(2);
        }
    }
    waits_after_join = thread_waits();
    struct timespec joined;
    clock_gettime(CLOCK_BOOTTIME, &joined);
    joined_at_ns = (unsigned long long)joined.tv_sec * 1000000000ull + joined.tv_nsec;
}

/* Print the ground truth, then block until stdin closes (unless hold is 0). */
static void report_and_hold(const char *json, int hold)
{
    printf("%s\n", json);
    fflush(stdout);
    if (hold) {
        char buf[64];
        while (read(0, buf, sizeof(buf)) > 0)
            ;
    }
}

/* Seconds on the monotonic clock: for the workloads' own wall-time measurements and deadlines. */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

#ifdef _GNU_SOURCE
#include <sched.h>

/* Pin this thread, and the threads it makes afterwards, to `cpu` (-1: leave them where they may run). */
static inline void pin_to_cpu(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        perror("sched_setaffinity");
        exit(2);
    }
}
#endif

#endif
