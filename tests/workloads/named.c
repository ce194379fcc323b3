/* named CGROUP_DIR NAME_HEX CALLS HOLD
 * Renames itself to the bytes NAME_HEX spells (prctl PR_SET_NAME: any bytes but NUL, at most 15, as any process
 * may), then makes exactly CALLS sched_yield(2) calls and reports. */
#include <sys/prctl.h>
#include <sys/syscall.h>
#include "common.h"

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: named CGROUP_DIR NAME_HEX CALLS HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    char name[16] = {0};
    size_t length = strlen(argv[2]) / 2;
    if (length > 15)
        length = 15;
    for (size_t i = 0; i < length; i++) {
        unsigned int byte;
        if (sscanf(argv[2] + 2 * i, "%2x", &byte) != 1)
            return 2;
        name[i] = (char)byte;
    }
    if (prctl(PR_SET_NAME, name) != 0) {
        perror("prctl");
        return 2;
    }
    long calls = atol(argv[3]);
    for (long i = 0; i < calls; i++)
        syscall(SYS_sched_yield);
    char json[128];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"yields\": %ld}", getpid(), calls);
    report_and_hold(json, atoi(argv[4]));
    return 0;
}
