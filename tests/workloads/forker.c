/* forker CGROUP_DIR CHILDREN YIELDS_PER_CHILD PARALLEL HOLD
 * A fork/exec storm: joins the cgroup, then forks CHILDREN processes, at most PARALLEL alive at once, each of
 * which execs this binary again to make exactly YIELDS_PER_CHILD sched_yield(2) calls and exit. The forker itself
 * never yields. Reports the children that exited cleanly and their yields; a child that failed is reported too. */
#include <errno.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "common.h"

static int child_main(const char *count)
{
    long calls = atol(count);
    for (long i = 0; i < calls; i++)
        syscall(SYS_sched_yield);
    return 0;
}

/* Wait for one child; count it as clean when it exited 0. */
static int reap(long *clean)
{
    int status;
    pid_t pid;
    while ((pid = wait(&status)) < 0 && errno == EINTR)
        ;
    if (pid < 0)
        return -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        (*clean)++;
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2]);
    if (argc != 6) {
        fprintf(stderr, "usage: forker CGROUP_DIR CHILDREN YIELDS_PER_CHILD PARALLEL HOLD\n");
        return 2;
    }
    join_cgroup(argv[1]);
    long children = atol(argv[2]);
    const char *per_child = argv[3];
    long parallel = atol(argv[4]);
    if (children < 0 || parallel < 1)
        return 2;
    long started = 0, clean = 0, alive = 0;
    while (started < children) {
        if (alive >= parallel) {
            if (reap(&clean) != 0)
                return 3;
            alive--;
        }
        pid_t pid = fork();
        if (pid < 0) {
            if (errno == EAGAIN && alive > 0) { /* out of processes for now: let one finish */
                if (reap(&clean) != 0)
                    return 3;
                alive--;
                continue;
            }
            perror("fork");
            return 3;
        }
        if (pid == 0) {
            execl("/proc/self/exe", "forker-child", "--child", per_child, (char *)NULL);
            _exit(127);
        }
        started++;
        alive++;
    }
    while (alive > 0) {
        if (reap(&clean) != 0)
            return 3;
        alive--;
    }
    char json[192];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"children\": %ld, \"clean\": %ld, \"yields\": %ld}", getpid(),
             children, clean, clean * atol(per_child));
    report_and_hold(json, atoi(argv[5]));
    return 0;
}
