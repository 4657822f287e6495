#define _GNU_SOURCE
#include "CSystemShims.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

// Exported by libswift_Concurrency with the Swift calling convention; no arguments, a pointer back (not retained).
extern void *swift_task_getCurrent(void) __attribute__((swiftcall));

uintptr_t rk_current_task(void) { return (uintptr_t)swift_task_getCurrent(); }

const uint32_t rk_EPOLLIN = EPOLLIN;
const uint32_t rk_EPOLLOUT = EPOLLOUT;
const uint32_t rk_EPOLLERR = EPOLLERR;
const uint32_t rk_EPOLLHUP = EPOLLHUP;
const uint32_t rk_EPOLLRDHUP = EPOLLRDHUP;
const uint32_t rk_EPOLLONESHOT = EPOLLONESHOT;

int rk_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int rk_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev;
    ev.events = events;
    ev.data.u64 = data;
    int cop = op == 1 ? EPOLL_CTL_ADD : (op == 2 ? EPOLL_CTL_DEL : EPOLL_CTL_MOD);
    return epoll_ctl(epfd, cop, fd, &ev);
}

int rk_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int max, int timeout_ms) {
    struct epoll_event buf[256];
    if (max > 256) max = 256;
    int n = epoll_wait(epfd, buf, max, timeout_ms);
    for (int i = 0; i < n; i++) {
        events[i] = buf[i].events;
        data[i] = buf[i].data.u64;
    }
    return n;
}

int rk_eventfd_create(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int rk_eventfd_signal(int fd) {
    uint64_t one = 1;
    ssize_t r;
    do { r = write(fd, &one, sizeof one); } while (r < 0 && errno == EINTR);
    if (r < 0 && errno == EAGAIN) return 0; /* counter saturated: a wake-up is pending anyway */
    return r < 0 ? -1 : 0;
}

int rk_eventfd_drain(int fd) {
    uint64_t value;
    ssize_t r;
    do { r = read(fd, &value, sizeof value); } while (r < 0 && errno == EINTR);
    if (r < 0 && errno == EAGAIN) return 0;
    return r < 0 ? -1 : 0;
}

int rk_errno(void) { return errno; }

int rk_set_nonblocking(int fd) {
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0) return -1;
    return fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

#include <sys/syscall.h>
int rk_pidfd_open(int pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int rk_pipe_cloexec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int rk_pipe_nonblocking(int fds[2]) { return pipe2(fds, O_NONBLOCK | O_CLOEXEC); }

#include <pthread.h>
int rk_set_thread_name(const char *name) { return pthread_setname_np(pthread_self(), name); }

#include <sys/socket.h>
int rk_accept_nonblocking(int fd) { return accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC); }

#include <sys/inotify.h>
int rk_inotify_watch_file(const char *path) {
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return -1;
    if (inotify_add_watch(fd, path, IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_DELETE_SELF | IN_MOVE_SELF) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

const int rk_SIGKILL = SIGKILL;

/// Closes every descriptor in [from, to]: close_range(2) where the kernel has it, else one by one.
static void rk_close_from(unsigned int from, unsigned int to) {
    if (from > to) return;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, from, to, 0) == 0) return;
#endif
    for (unsigned int fd = from; fd <= to && fd < 65536; fd++) close((int)fd);
}

/// The child's side of rk_spawn: system calls only (the parent may have had other threads at the fork).
static void rk_spawn_child(const char *path, char *const argv[], char *const envp[], const int child_fds[3],
                           int death_signal, pid_t parent, int report) {
    if (report < 3) report = fcntl(report, F_DUPFD_CLOEXEC, 3);  // a parent with 0, 1 or 2 closed
    struct sigaction standard;
    memset(&standard, 0, sizeof standard);
    standard.sa_handler = SIG_DFL;
    for (int number = 1; number < NSIG; number++) {
        if (number != SIGKILL && number != SIGSTOP) sigaction(number, &standard, NULL);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (death_signal != 0) {
        if (prctl(PR_SET_PDEATHSIG, death_signal) != 0 || getppid() != parent) _exit(127);
    }
    // Move every source above the targets first: a source may itself be numbered 0, 1 or 2.
    int moved[3];
    for (int i = 0; i < 3; i++) {
        moved[i] = child_fds[i] >= 0 ? fcntl(child_fds[i], F_DUPFD_CLOEXEC, 3) : -1;
        if (child_fds[i] >= 0 && moved[i] < 0) goto fail;
    }
    for (int i = 0; i < 3; i++) {
        if (moved[i] >= 0 && dup2(moved[i], i) < 0) goto fail;
    }
    // Nothing but 0, 1, 2 and the report pipe (close-on-exec) survives: no inherited socket, lock or pipe.
    rk_close_from(3, (unsigned int)report - 1);
    rk_close_from((unsigned int)report + 1, ~0U);
    execve(path, argv, envp);
fail:;
    int error = errno;
    ssize_t written;
    do {
        written = write(report, &error, sizeof error);
    } while (written < 0 && errno == EINTR);
    _exit(127);
}

int rk_spawn(const char *path, char *const argv[], char *const envp[], const int child_fds[3], int death_signal,
             int *pid) {
    int report[2];
    if (pipe2(report, O_CLOEXEC) != 0) return errno;
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        int error = errno;
        close(report[0]);
        close(report[1]);
        return error;
    }
    if (child == 0) rk_spawn_child(path, argv, envp, child_fds, death_signal, parent, report[1]);
    close(report[1]);
    // The report pipe reaches end-of-file at the exec (close-on-exec); an error number arrives instead if the exec
    // failed.
    int error = 0;
    ssize_t got;
    do {
        got = read(report[0], &error, sizeof error);
    } while (got < 0 && errno == EINTR);
    close(report[0]);
    if (got == (ssize_t)sizeof error) {
        while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {
        }
        return error;
    }
    *pid = child;
    return 0;
}

/* Signals turned into eventfd writes (rk_signal_to_eventfd): the eventfd per signal, plus one (0: none). */
static int rk_signal_eventfds[65];

static void rk_signal_to_eventfd_handler(int signal) {
    int saved = errno;
    int fd = __atomic_load_n(&rk_signal_eventfds[signal], __ATOMIC_ACQUIRE) - 1;
    if (fd >= 0) {
        uint64_t one = 1;
        (void)!write(fd, &one, sizeof one);
    }
    errno = saved;
}

int rk_signal_to_eventfd(int signal, int fd) {
    if (signal < 1 || signal > 64) {
        errno = EINVAL;
        return -1;
    }
    __atomic_store_n(&rk_signal_eventfds[signal], fd + 1, __ATOMIC_RELEASE);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = rk_signal_to_eventfd_handler;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    return sigaction(signal, &action, NULL);
}
