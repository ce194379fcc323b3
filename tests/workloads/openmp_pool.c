/* openmp_pool CGROUP_DIRS SECONDS HOLD
 * An OpenMP (libgomp) parallel region whose threads each burn CPU for SECONDS of wall time; then the pool's
 * threads stay parked in libgomp while the process holds. Reports the pid and the pool's size (OMP_NUM_THREADS,
 * or every CPU when unset). Build with -fopenmp. */
#include <omp.h>
#include <time.h>
#include "common.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: openmp_pool CGROUP_DIRS SECONDS HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    double seconds = atof(argv[2]);
    int threads = 0;
#pragma omp parallel
    {
#pragma omp single
        threads = omp_get_num_threads();
        double end = now() + seconds;
        volatile unsigned long sink = 0;
        while (now() < end)
            for (int i = 0; i < 10000; i++)
                sink += i;
    }
    char json[128];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"threads\": %d}", getpid(), threads);
    report_and_hold(json, atoi(argv[3]));
    return 0;
}
