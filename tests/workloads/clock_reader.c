/* clock_reader CGROUP_DIRS SECONDS MODE WORK
 * One thread timestamps events for SECONDS of wall time, as a tracer or a logger does: each event reads
 * CLOCK_MONOTONIC, then does WORK iterations of arithmetic. MODE "syscall" reads the clock through syscall(2), as
 * every read goes on a clock source without a vDSO fast path (hpet, acpi_pm, an unstable TSC); MODE "vdso" reads it
 * through the C library, which stays in user space on this machine's tsc. Reports the reads it made. */
#define _GNU_SOURCE
#include <sys/syscall.h>
#include "common.h"

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[3], "syscall") != 0 && strcmp(argv[3], "vdso") != 0)) {
        fprintf(stderr, "usage: clock_reader CGROUP_DIRS SECONDS syscall|vdso WORK\n");
        return 2;
    }
    join_cgroup(argv[1]);
    double seconds = atof(argv[2]), started = now();
    int through_syscall = strcmp(argv[3], "syscall") == 0;
    long work = atol(argv[4]), reads = 0;
    volatile unsigned long sink = 0;
    struct timespec ts;
    for (;;) {
        if (through_syscall)
            syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts);
        else
            clock_gettime(CLOCK_MONOTONIC, &ts);
        reads++;
        for (long i = 0; i < work; i++)
            sink += i ^ (unsigned long)ts.tv_nsec;
        if ((reads & 1023) == 0 && now() >= started + seconds)
            break;
    }
    char json[160];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"reads\": %ld, \"mode\": \"%s\"}", getpid(), reads, argv[3]);
    report_and_hold(json, 0);
    return 0;
}
