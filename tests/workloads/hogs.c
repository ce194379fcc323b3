/* hogs CGROUP_DIRS PROCS SECONDS
 * PROCS single-threaded processes, each burning CPU for SECONDS of wall time: more of them than CPUs is a run
 * queue that never empties, with no thread pool anywhere. Reports {"pid", "procs", "seconds"} when all are done. */
#include <sys/wait.h>
#include <time.h>
#include "common.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: hogs CGROUP_DIRS PROCS SECONDS\n");
        return 2;
    }
    join_cgroup(argv[1]);
    int procs = atoi(argv[2]);
    double seconds = atof(argv[3]), started = now();
    for (int i = 0; i < procs; i++) {
        pid_t child = fork();
        if (child < 0) {
            perror("fork");
            return 1;
        }
        if (child == 0) {
            volatile unsigned long sink = 0;
            while (now() < started + seconds)
                for (int j = 0; j < 10000; j++)
                    sink += j;
            _exit(0);
        }
    }
    while (wait(NULL) > 0)
        ;
    char json[256];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"procs\": %d, \"seconds\": %.3f}", getpid(), procs, now() - started);
    report_and_hold(json, 0);
    return 0;
}
