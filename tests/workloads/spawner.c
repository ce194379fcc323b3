/* spawner CGROUP_DIRS SECONDS RATE MODE
 * Handles RATE requests a second for SECONDS of wall time, each by running /bin/true. MODE "exec": a fork and exec
 * of /bin/true per request, waited for (a shell loop, subprocess.run per request, Pool(maxtasksperchild=1));
 * "reuse": one helper process, started once, takes each request over a pipe and answers it (a worker kept alive:
 * the fix). Reports the requests handled and the processes it started. */
#include <errno.h>
#include <sys/wait.h>
#include "common.h"

static int run_true(void)
{
    pid_t child = fork();
    if (child < 0)
        return -1;
    if (child == 0) {
        execl("/bin/true", "true", (char *)NULL);
        _exit(127);
    }
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[4], "exec") != 0 && strcmp(argv[4], "reuse") != 0)) {
        fprintf(stderr, "usage: spawner CGROUP_DIRS SECONDS RATE exec|reuse\n");
        return 2;
    }
    join_cgroup(argv[1]);
    double seconds = atof(argv[2]), rate = atof(argv[3]), started = now();
    int reuse = strcmp(argv[4], "reuse") == 0;
    int requests[2], answers[2];
    long handled = 0, processes = 0;
    if (reuse) {
        if (pipe(requests) != 0 || pipe(answers) != 0)
            return 3;
        pid_t helper = fork();
        if (helper < 0)
            return 3;
        if (helper == 0) { /* the helper: answers each request byte with one byte, until the requests end */
            close(requests[1]);
            close(answers[0]);
            char byte;
            while (read(requests[0], &byte, 1) == 1)
                if (write(answers[1], &byte, 1) != 1)
                    _exit(3);
            _exit(0);
        }
        close(requests[0]);
        close(answers[1]);
        processes = 1;
    }
    while (now() < started + seconds) {
        double due = started + handled / rate;
        double wait = due - now();
        if (wait > 0) {
            struct timespec nap = {.tv_sec = (time_t)wait, .tv_nsec = (long)((wait - (time_t)wait) * 1e9)};
            nanosleep(&nap, NULL);
        }
        if (reuse) {
            char byte = 'r';
            if (write(requests[1], &byte, 1) != 1 || read(answers[0], &byte, 1) != 1)
                return 3;
        } else {
            if (run_true() != 0)
                return 3;
            processes++;
        }
        handled++;
    }
    if (reuse) {
        close(requests[1]);
        while (wait(NULL) > 0)
            ;
    }
    char json[160];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"requests\": %ld, \"processes\": %ld}", getpid(), handled,
             processes);
    report_and_hold(json, 0);
    return 0;
}
