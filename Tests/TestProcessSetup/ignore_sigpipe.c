// The test process writes to real pipes, FIFOs and sockets whose readers the tests close on purpose (a
// cancelled reader, a dropped connection, a killed server); such a write must fail with EPIPE, as the tests
// expect, instead of killing the whole test process with SIGPIPE. Set once, before any test runs. Test code only:
// the libraries never change a process's signal dispositions (their own socket writes use MSG_NOSIGNAL).
#include <signal.h>

__attribute__((constructor)) static void rk_tests_ignore_sigpipe(void) { signal(SIGPIPE, SIG_IGN); }
