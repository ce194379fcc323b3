/* syscaller CGROUP_DIR CLOCK_GETTIMES NANOSLEEPS SLEEP_NS MMAPS FORKS GETPPIDS HOLD
 * Joins the cgroup, then makes, each through syscall(2) so that neither the vDSO nor the C library changes them:
 * CLOCK_GETTIMES clock_gettime, NANOSLEEPS nanosleep of SLEEP_NS each, MMAPS mmap + munmap pairs of one page,
 * FORKS raw clone(SIGCHLD) children that exit at once (exit_group) and are each reaped with wait4, and GETPPIDS
 * getppid. Reports what it made and the wall time of the sleeps (two clock reads around them, made whatever the
 * counts, so a run with every count 0 makes the same calls besides these). */
#define _GNU_SOURCE
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include "common.h"

int main(int argc, char **argv)
{
    if (argc != 9) {
        fprintf(stderr, "usage: syscaller CGROUP_DIR CLOCK_GETTIMES NANOSLEEPS SLEEP_NS MMAPS FORKS GETPPIDS HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    long clocks = atol(argv[2]), sleeps = atol(argv[3]), sleep_ns = atol(argv[4]), maps = atol(argv[5]);
    long forks = atol(argv[6]), getppids = atol(argv[7]);

    struct timespec ts;
    for (long i = 0; i < clocks; i++)
        syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);

    struct timespec nap = {.tv_sec = sleep_ns / 1000000000L, .tv_nsec = sleep_ns % 1000000000L};
    double start = now();
    for (long i = 0; i < sleeps; i++)
        if (syscall(SYS_nanosleep, &nap, NULL) != 0)
            return 3;
    double slept = now() - start;

    for (long i = 0; i < maps; i++) {
        void *page = (void *)syscall(SYS_mmap, NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (page == MAP_FAILED || syscall(SYS_munmap, page, 4096) != 0)
            return 3;
    }

    for (long i = 0; i < forks; i++) {
        long child = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
        if (child == 0)
            syscall(SYS_exit_group, 0);
        int status;
        if (child < 0 || syscall(SYS_wait4, child, &status, 0, NULL) != child)
            return 3;
    }

    for (long i = 0; i < getppids; i++)
        syscall(SYS_getppid);

    char json[512];
    snprintf(json, sizeof(json),
             "{\"pid\": %d, \"clock_gettime\": %ld, \"nanosleep\": %ld, \"mmap\": %ld, \"munmap\": %ld, "
             "\"clone\": %ld, \"wait4\": %ld, \"child_exit_group\": %ld, \"getppid\": %ld, \"slept_ns\": %.0f}",
             getpid(), clocks, sleeps, maps, maps, forks, forks, forks, getppids, slept * 1e9);
    report_and_hold(json, atoi(argv[8]));
    return 0;
}
