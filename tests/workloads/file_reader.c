/* file_reader CGROUP_DIRS SECONDS FILE
 * Reads FILE from start to end, 1 MiB at a time, over and over for SECONDS of wall time, as a job that scans its
 * data set each pass does. It first drops the file's pages from the page cache (posix_fadvise DONTNEED), so that
 * what it reads is charged to its own cgroup: under a memory limit smaller than the file, each pass reclaims the
 * pages of the last one and reads them again. Reports the passes and the bytes read. */
#define _GNU_SOURCE
#include <fcntl.h>
#include "common.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: file_reader CGROUP_DIRS SECONDS FILE\n");
        return 2;
    }
    join_cgroup(argv[1]);
    double seconds = atof(argv[2]), started = now();
    int fd = open(argv[3], O_RDONLY);
    /* Written back first: dirty pages would stay cached (charged to their writer) whatever DONTNEED asks. (On a
     * read-only mount there is nothing dirty, and fdatasync may refuse: that is fine.) */
    if (fd >= 0)
        (void)fdatasync(fd);
    if (fd < 0 || posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) {
        perror(argv[3]);
        return 3;
    }
    static char chunk[1 << 20];
    long passes = 0;
    long long bytes = 0;
    while (now() < started + seconds) {
        ssize_t got;
        if (lseek(fd, 0, SEEK_SET) != 0)
            return 3;
        while ((got = read(fd, chunk, sizeof(chunk))) > 0) {
            bytes += got;
            if (now() >= started + seconds)
                break;
        }
        if (got < 0)
            return 3;
        passes++;
    }
    char json[160];
    snprintf(json, sizeof(json), "{\"pid\": %d, \"passes\": %ld, \"bytes\": %lld}", getpid(), passes, bytes);
    report_and_hold(json, 0);
    return 0;
}
