/* burst CGROUP_PROCS MS_PER_SECOND
 * Joins the cgroup of CGROUP_PROCS, then forever: spins for MS_PER_SECOND milliseconds in burn() once a second, at
 * a phase of the second its pid chooses (so that a thousand of them do not wake at once). A thousand of these give
 * a thousand workloads that each show up in the on-CPU samples now and then. */
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static volatile unsigned long sink;

__attribute__((noinline)) static void burn(double seconds)
{
    double end = now() + seconds;
    while (now() < end)
        for (int i = 0; i < 1000; i++)
            sink += i;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: burst CGROUP_DIR MS_PER_SECOND\n");
        return 2;
    }
    FILE *procs = fopen(argv[1], "w");
    if (!procs || fprintf(procs, "0\n") < 0 || fclose(procs) != 0) {
        perror(argv[1]);
        return 2;
    }
    double busy = atof(argv[2]) / 1000;
    double phase = (getpid() % 1000) / 1000.0;
    for (;;) {
        burn(busy);
        double next = (long)now() + 1.0 + phase;
        if (next - now() > 1.0)
            next -= 1.0;
        struct timespec pause = {0, (long)((next - now()) * 1e9)};
        if (pause.tv_nsec > 0)
            nanosleep(&pause, NULL);
    }
}
