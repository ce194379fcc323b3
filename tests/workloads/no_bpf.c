/* no_bpf [--only CMD] COMMAND [ARGS...]
 * Runs COMMAND under a seccomp filter that fails every bpf(2) call with EPERM, as a locked-down host or a
 * container runtime's default profile does, while every capability stays in place. With --only, just the bpf(2)
 * calls whose command (first argument) is CMD fail, e.g. 2 for BPF_MAP_UPDATE_ELEM. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int first = 1, only = -1;
    if (argc > 3 && strcmp(argv[1], "--only") == 0) {
        only = atoi(argv[2]);
        first = 3;
    }
    if (argc <= first) {
        fprintf(stderr, "usage: no_bpf [--only CMD] COMMAND [ARGS...]\n");
        return 2;
    }
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS), /* built for x86_64 system call numbers only */
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_bpf, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])), /* low half, little-endian */
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)only, 0, only < 0 ? 0 : 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {.len = sizeof(filter) / sizeof(filter[0]), .filter = filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
        perror("seccomp");
        return 2;
    }
    execvp(argv[first], argv + first);
    perror(argv[first]);
    return 127;
}
