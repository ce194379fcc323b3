/* omp_procs CGROUP_DIRS PROCS WORK
 * PROCS processes, each alternating an OpenMP (libgomp) parallel loop with a serial part of the same size, as a
 * numeric pipeline does. Between loops libgomp's idle threads spin in user space before they sleep, so with the
 * default team size (every CPU) in several processes they take the CPUs the serial parts need. WORK is a number
 * of rounds per process (fixed work: compare wall times) or "<N>s" (rounds for N seconds of wall time). Build with
 * -fopenmp. Reports {"pid", "procs", "threads", "rounds", "seconds"} when all are done. */
#include <omp.h>
#include <sys/wait.h>
#include <time.h>
#include "common.h"

#define SLICE 20000

static double data[64 * SLICE];

static double serial_part(void)
{
    double sum = 0;
    for (int i = 0; i < 8 * SLICE; i++)
        sum += data[i] * 0.5;
    return sum;
}

static void run(long rounds, double deadline)
{
    volatile double sink = 0;
    for (long r = 0; r < rounds && (deadline == 0 || now() < deadline); r++) {
#pragma omp parallel for schedule(static)
        for (int i = 0; i < 64 * SLICE; i++)
            data[i] = data[i] * 0.999 + (double)(i & 7);
        sink += serial_part();
        sink += serial_part();
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: omp_procs CGROUP_DIRS PROCS WORK\n");
        return 2;
    }
    join_cgroup(argv[1]);
    int procs = atoi(argv[2]);
    size_t length = strlen(argv[3]);
    int timed = length > 0 && argv[3][length - 1] == 's';
    long rounds = timed ? 1L << 60 : atol(argv[3]);
    double started = now(), deadline = timed ? started + atof(argv[3]) : 0;
    for (int i = 0; i < procs; i++) {
        pid_t child = fork();
        if (child < 0) {
            perror("fork");
            return 1;
        }
        if (child == 0) {
            run(rounds, deadline);
            _exit(0);
        }
    }
    while (wait(NULL) > 0)
        ;
    char json[256];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"procs\": %d, \"threads\": %d, \"rounds\": %ld, \"seconds\": %.3f}", getpid(), procs,
           omp_get_max_threads(), timed ? -1L : rounds, now() - started);
    report_and_hold(json, 0);
    return 0;
}
