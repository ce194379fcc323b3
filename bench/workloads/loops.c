/* loops MODE COUNT: time COUNT operations and print {"mode", "ops", "ns_per_op"}.
 *   yield     sched_yield(2) in a tight loop (the storm schedwatch counts)
 *   getppid   getppid(2), a syscall schedwatch does not trace (must cost nothing extra)
 *   futex     FUTEX_WAIT/FUTEX_WAKE ping-pong between two threads on one CPU; ns per round trip
 *   ring      a token passed around a ring of RING_THREADS threads on all CPUs, each hop a futex
 *             wake-up and a context switch (a wake-up storm); ns per hop
 *   fork      fork(2) a child that exits at once, and wait for it; ns per process
 *   thread    create a thread that returns at once, and join it; ns per thread
 *   pipe2     a byte passed back and forth over two pipes between this process and a child on one CPU, the child in
 *             the cgroup2 directory LOOPS_CHILD_CGROUP names (another workload: each wait for the CPU is held by
 *             the other one); ns per round trip
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint32_t turn; /* 0: ping's turn, 1: pong's turn */
static long rounds;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t value)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *pong(void *unused)
{
    (void)unused;
    for (long i = 0; i < rounds; i++) {
        while (atomic_load(&turn) != 1)
            futex_wait(&turn, 0);
        atomic_store(&turn, 0);
        futex_wake(&turn);
    }
    return NULL;
}

#define RING_THREADS 16
static _Atomic uint32_t ring_turn[RING_THREADS];
static long ring_hops;

static void *ring_member(void *slot)
{
    long me = (long)slot;
    for (long hop = me; hop < ring_hops; hop += RING_THREADS) {
        while (atomic_load(&ring_turn[me]) == 0)
            futex_wait(&ring_turn[me], 0);
        atomic_store(&ring_turn[me], 0);
        long next = (me + 1) % RING_THREADS;
        atomic_store(&ring_turn[next], 1);
        futex_wake(&ring_turn[next]);
    }
    return NULL;
}

static void *return_at_once(void *unused)
{
    return unused;
}

static void pin_to_cpu0(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    sched_setaffinity(0, sizeof(set), &set);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: loops yield|getppid|futex|ring|fork|thread|pipe2 COUNT\n");
        return 2;
    }
    long count = atol(argv[2]);
    uint64_t start = 0, end = 0;
    if (strcmp(argv[1], "yield") == 0) {
        start = now_ns();
        for (long i = 0; i < count; i++)
            syscall(SYS_sched_yield);
        end = now_ns();
    } else if (strcmp(argv[1], "getppid") == 0) {
        start = now_ns();
        for (long i = 0; i < count; i++)
            syscall(SYS_getppid);
        end = now_ns();
    } else if (strcmp(argv[1], "futex") == 0) {
        pin_to_cpu0(); /* both threads inherit CPU 0: wake-ups stay on one CPU */
        rounds = count;
        pthread_t thread;
        pthread_create(&thread, NULL, pong, NULL);
        start = now_ns();
        for (long i = 0; i < count; i++) {
            atomic_store(&turn, 1);
            futex_wake(&turn);
            while (atomic_load(&turn) != 0)
                futex_wait(&turn, 1);
        }
        end = now_ns();
        pthread_join(thread, NULL);
    } else if (strcmp(argv[1], "fork") == 0) {
        start = now_ns();
        for (long i = 0; i < count; i++) {
            pid_t child = fork();
            if (child == 0)
                _exit(0);
            waitpid(child, NULL, 0);
        }
        end = now_ns();
    } else if (strcmp(argv[1], "thread") == 0) {
        start = now_ns();
        for (long i = 0; i < count; i++) {
            pthread_t thread;
            pthread_create(&thread, NULL, return_at_once, NULL);
            pthread_join(thread, NULL);
        }
        end = now_ns();
    } else if (strcmp(argv[1], "pipe2") == 0) {
        const char *cgroup = getenv("LOOPS_CHILD_CGROUP");
        int there[2], back[2];
        char byte = 0;
        if (!cgroup || pipe(there) != 0 || pipe(back) != 0)
            return 2;
        pin_to_cpu0(); /* the child inherits CPU 0 */
        pid_t child = fork();
        if (child == 0) {
            char path[4200];
            snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
            FILE *procs = fopen(path, "w");
            if (!procs || fprintf(procs, "%d\n", getpid()) < 0 || fclose(procs) != 0)
                _exit(3);
            for (long i = 0; i < count; i++)
                if (read(there[0], &byte, 1) != 1 || write(back[1], &byte, 1) != 1)
                    _exit(3);
            _exit(0);
        }
        /* one round trip first: the child has joined its cgroup before the clock starts */
        if (write(there[1], &byte, 1) != 1 || read(back[0], &byte, 1) != 1)
            return 3;
        start = now_ns();
        for (long i = 1; i < count; i++)
            if (write(there[1], &byte, 1) != 1 || read(back[0], &byte, 1) != 1)
                return 3;
        end = now_ns();
        int status;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            return 3;
        count--;
    } else if (strcmp(argv[1], "ring") == 0) {
        ring_hops = count;
        pthread_t threads[RING_THREADS];
        for (long t = 0; t < RING_THREADS; t++)
            pthread_create(&threads[t], NULL, ring_member, (void *)t);
        start = now_ns();
        atomic_store(&ring_turn[0], 1);
        futex_wake(&ring_turn[0]);
        for (int t = 0; t < RING_THREADS; t++)
            pthread_join(threads[t], NULL);
        end = now_ns();
    } else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    printf("{\"mode\": \"%s\", \"ops\": %ld, \"ns_per_op\": %.2f}\n", argv[1], count, (double)(end - start) / count);
    return 0;
}
