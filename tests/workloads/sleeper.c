/* sleeper CGROUP_DIRS COUNT SLEEP_NS HOLD
 * One thread sleeps COUNT times for SLEEP_NS each; reports the sleep time measured around the calls and its waits
 * for a CPU counted before and after it joined the cgroup. */
#include <stdint.h>
#include <time.h>
#include "common.h"

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: sleeper CGROUP_DIRS COUNT SLEEP_NS HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    long count = atol(argv[2]);
    uint64_t sleep_ns = strtoull(argv[3], NULL, 10), slept = 0;
    struct timespec ts = {.tv_sec = sleep_ns / 1000000000ull, .tv_nsec = sleep_ns % 1000000000ull};
    for (long i = 0; i < count; i++) {
        uint64_t start = now_ns();
        nanosleep(&ts, NULL);
        slept += now_ns() - start;
    }
    char json[256];
    snprintf(json, sizeof(json),
             "{\"pid\": %d, \"slept_ns\": %llu, \"waits_before_join\": %llu, \"waits_after_join\": %llu, "
             "\"joined_at_ns\": %llu}",
             getpid(), (unsigned long long)slept, waits_before_join, waits_after_join, joined_at_ns);
    report_and_hold(json, atoi(argv[4]));
    return 0;
}
