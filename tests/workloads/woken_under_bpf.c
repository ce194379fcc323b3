/* woken_under_bpf CGROUP_DIRS ROUNDS SLEEP_NS SPIN_WHO HOLD
 * Two threads on one CPU. Each round one thread sleeps SLEEP_NS; the other, once it sees the first asleep, calls
 * getpriority(PRIO_PROCESS, SPIN_WHO), which the test's BPF program turns into a spin in the kernel longer than the
 * sleep. The sleeper's timer then wakes it in an interrupt while that program runs on its CPU, and the kernel runs no
 * other BPF program for that wake-up. Reports the rounds done and how many of them woke the sleeper inside the spin
 * (its timer due after the call began and at least 1 ms before it returned). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include "common.h"

static atomic_long started = -1, woken = 0;
static _Atomic double asleep_at;  /* when the sleeper last began to sleep */
static atomic_int sleeper_tid;
static long rounds;
static struct timespec nap;

static void *sleeper(void *unused)
{
    (void)unused;
    sleeper_tid = (int)syscall(SYS_gettid);
    for (long round = 0; round < rounds; round++) {
        asleep_at = now();
        started = round;
        nanosleep(&nap, NULL);
        woken = round + 1;
    }
    return NULL;
}

/* Whether thread `tid` of this process is asleep (state S in its stat line). */
static int asleep(int tid)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
    FILE *stat = fopen(path, "r");
    if (!stat)
        return 0;
    size_t length = fread(line, 1, sizeof(line) - 1, stat);
    fclose(stat);
    line[length] = '\0';
    char *end = strrchr(line, ')');
    return end && end[1] == ' ' && end[2] == 'S';
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: woken_under_bpf CGROUP_DIRS ROUNDS SLEEP_NS SPIN_WHO HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    rounds = atol(argv[2]);
    uint64_t sleep_ns = strtoull(argv[3], NULL, 10);
    nap.tv_sec = sleep_ns / 1000000000ull;
    nap.tv_nsec = sleep_ns % 1000000000ull;
    id_t spin_who = (id_t)atol(argv[4]);

    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    if (sched_setaffinity(0, sizeof(one), &one) != 0) {  /* inherited by the sleeper */
        perror("sched_setaffinity");
        return 2;
    }
    pthread_t thread;
    if (pthread_create(&thread, NULL, sleeper, NULL) != 0) {
        perror("pthread_create");
        return 2;
    }
    long covered = 0;
    double nap_seconds = sleep_ns / 1e9;
    /* A loaded host may keep this thread off its CPU through a whole round: the sleeper then goes on to the next,
     * and this thread takes whichever round it next finds the sleeper asleep in, never waiting for one gone by. */
    while (woken < rounds) {
        long round = started;
        if (round < 0 || woken > round || !asleep(sleeper_tid)) {
            sched_yield();
            continue;
        }
        double due = asleep_at + nap_seconds, called = now();  /* before the sleeper can begin its next round */
        getpriority(PRIO_PROCESS, spin_who);
        covered += called < due && due < now() - 0.001;
        while (woken <= round)
            sched_yield();
    }
    pthread_join(thread, NULL);

    char json[96];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"rounds\": %ld, \"covered\": %ld}", getpid(), rounds, covered);
    report_and_hold(json, atoi(argv[5]));
    return 0;
}
