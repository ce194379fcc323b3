/* rusage_storm CGROUP_DIRS SECONDS RATE
 * One thread asks the kernel for its own resource usage, getrusage(2), RATE times a second (0: as fast as it can)
 * for SECONDS of wall time, as a program timing each small request by its CPU use does: system time in a call of
 * none of the known families (clock, sleep, poll, memory, process, file, network), so no known cause explains it.
 * Reports the calls made. */
#include <sys/resource.h>
#include "common.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: rusage_storm CGROUP_DIRS SECONDS RATE\n");
        return 2;
    }
    join_cgroup(argv[1]);
    double seconds = atof(argv[2]), rate = atof(argv[3]), started = now();
    long calls = 0;
    struct rusage usage;
    while (now() < started + seconds) {
        if (getrusage(RUSAGE_SELF, &usage) != 0)
            return 3;
        calls++;
        if (rate > 0) {
            double wait = started + calls / rate - now();
            if (wait > 0) {
                struct timespec nap = {.tv_sec = (time_t)wait, .tv_nsec = (long)((wait - (time_t)wait) * 1e9)};
                nanosleep(&nap, NULL);
            }
        }
    }
    char json[128];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"calls\": %ld}", getpid(), calls);
    report_and_hold(json, 0);
    return 0;
}
