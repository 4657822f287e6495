#define _GNU_SOURCE
#include "CSystemShims.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

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
