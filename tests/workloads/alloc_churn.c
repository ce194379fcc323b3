/* alloc_churn CGROUP_DIRS SECONDS THREADS BYTES [ROUNDS]
 * THREADS threads each allocate a buffer of BYTES with malloc, write every page of it, and free it, over and over
 * for SECONDS of wall time (or, given ROUNDS, until they made ROUNDS rounds together: a fixed amount of work), as a
 * program that builds a large temporary per request does. glibc serves an
 * allocation of 32 MiB or more with a fresh mmap and returns it to the kernel on free (munmap) however often it
 * comes back, so each round maps, faults in and zeroes every page, then unmaps them; with the allocator told to
 * keep freed memory (MALLOC_MMAP_MAX_=0 and a MALLOC_TRIM_THRESHOLD_ above BYTES) the main thread reuses the same
 * memory (other threads' arenas cannot hold 64 MiB or more, and map it afresh whatever they are told). The main
 * thread is the first of THREADS. Its pages are 4 KiB whatever the host's transparent huge pages say (on a host
 * with THP "always" a 64 MiB buffer would fault in 2 MiB at a time). Reports the rounds made. */
#include <pthread.h>
#include <sys/prctl.h>
#include <stdatomic.h>
#include "common.h"

static double deadline;
static size_t bytes;
static long wanted; /* rounds to make together; 0: as many as fit in the time */
static atomic_long rounds;

static void *churn(void *unused)
{
    (void)unused;
    long page = sysconf(_SC_PAGESIZE);
    while (now() < deadline && (wanted == 0 || atomic_fetch_add(&rounds, 1) < wanted)) {
        volatile char *buffer = malloc(bytes);
        if (!buffer)
            exit(3);
        for (size_t offset = 0; offset < bytes; offset += page)
            buffer[offset] = (char)offset;
        free((void *)buffer);
        if (wanted == 0)
            atomic_fetch_add(&rounds, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: alloc_churn CGROUP_DIRS SECONDS THREADS BYTES [ROUNDS]\n");
        return 2;
    }
    join_cgroup(argv[1]);
    if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0)
        return 4;
    deadline = now() + atof(argv[2]);
    int threads = atoi(argv[3]);
    bytes = (size_t)atol(argv[4]);
    wanted = argc == 6 ? atol(argv[5]) : 0;
    if (threads < 1 || threads > 64 || bytes == 0)
        return 2;
    pthread_t ids[64];
    for (int i = 1; i < threads; i++)
        if (pthread_create(&ids[i], NULL, churn, NULL) != 0)
            return 3;
    churn(NULL);
    for (int i = 1; i < threads; i++)
        pthread_join(ids[i], NULL);
    char json[128];
    long made = atomic_load(&rounds);
    snprintf(json, sizeof(json), "{\"pid\": %d, \"rounds\": %ld}", getpid(), wanted && made > wanted ? wanted : made);
    report_and_hold(json, 0);
    return 0;
}
