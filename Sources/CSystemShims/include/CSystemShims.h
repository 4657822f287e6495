#ifndef RESOURCEKIT_CSYSTEMSHIMS_H
#define RESOURCEKIT_CSYSTEMSHIMS_H

#include <stdint.h>
#include <sys/types.h>

/// Interest and readiness bits, mirrored from <sys/epoll.h> so Swift sees plain integers.
extern const uint32_t rk_EPOLLIN;
extern const uint32_t rk_EPOLLOUT;
extern const uint32_t rk_EPOLLERR;
extern const uint32_t rk_EPOLLHUP;
extern const uint32_t rk_EPOLLRDHUP;
extern const uint32_t rk_EPOLLONESHOT;

/// epoll_create1(EPOLL_CLOEXEC); -1 and errno on failure.
int rk_epoll_create(void);
/// epoll_ctl with the event spelled as (events, data.u64); op is 1 add, 2 del, 3 mod.
int rk_epoll_ctl(int epfd, int op, int fd, uint32_t events, uint64_t data);
/// epoll_wait that unpacks the (packed) epoll_event array into two parallel arrays.
int rk_epoll_wait(int epfd, uint32_t *events, uint64_t *data, int max, int timeout_ms);

/// eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK).
int rk_eventfd_create(void);
/// Adds 1 to the eventfd counter; returns 0 or -1 with errno.
int rk_eventfd_signal(int fd);
/// Resets the counter to zero; returns 0 (also when it was already zero) or -1 with errno.
int rk_eventfd_drain(int fd);

/// From now on `signal` (1...64) adds 1 to eventfd `fd` (a handler that only writes, async-signal-safe, with
/// SA_RESTART), instead of its default action; `fd` -1: the signal is received and dropped. Returns 0 or -1 (errno).
int rk_signal_to_eventfd(int signal, int fd);

/// The calling thread's errno.
int rk_errno(void);

/// The running Swift task's address (the Concurrency runtime's `swift_task_getCurrent`, the function
/// `withUnsafeCurrentTask` calls), or 0 off a task: an identity to compare, never to dereference. Swift can read it
/// only through `UnsafeCurrentTask`, a resilient struct whose every use goes through type metadata and value
/// witnesses; the core reads it on every scope's start (`TaskIdentity`, Docs/Decisions/0006).
uintptr_t rk_current_task(void);
/// Sets O_NONBLOCK on fd; 0 or -1 with errno.
int rk_set_nonblocking(int fd);
/// pidfd_open(pid, 0): a descriptor that becomes readable when the process exits; -1 and errno on failure.
int rk_pidfd_open(int pid);
/// Close-on-exec pipe whose ends block; 0 or -1 with errno.
int rk_pipe_cloexec(int fds[2]);
/// Non-blocking, close-on-exec pipe; 0 or -1 with errno.
int rk_pipe_nonblocking(int fds[2]);

/// Names the calling thread (at most 15 bytes).
int rk_set_thread_name(const char *name);

/// accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC).
int rk_accept_nonblocking(int fd);

/// A non-blocking inotify descriptor watching `path` for growth, metadata changes, deletion and moves.
int rk_inotify_watch_file(const char *path);

/// Starts `path` (an absolute path) with `argv` and `envp` in a new process and returns 0 with its pid in `pid`,
/// or an error number (the exec's own, such as ENOENT, when the program could not be started).
///
/// The child gets `child_fds[i]` as its descriptor i (i = 0, 1, 2; -1 keeps the parent's own i) and no other
/// descriptor at all: everything from 3 up is closed before the exec, close-on-exec or not. Every signal is at its
/// default disposition and none is blocked. With `death_signal` non-zero, the child receives that signal when the
/// *thread* that called this ends (Linux PR_SET_PDEATHSIG; call it from a thread that lives as long as the process),
/// and a child whose parent is already gone exits at once. Between fork and exec the child makes system calls only.
int rk_spawn(const char *path, char *const argv[], char *const envp[], const int child_fds[3], int death_signal,
             int *pid);
/// The default signal number a child gets when its parent dies (SIGKILL).
extern const int rk_SIGKILL;

#endif
