// The target's constructor sets the test process up (SIGPIPE ignored) before any test runs; nothing to call.

// A coverage window (coverage_window.c): what code runs between its opening and its closing, in a test process
// built with `--enable-code-coverage`; `Scripts/walks` lists the source files and functions it saw.

/// Zeroes the coverage counters; 0 when the process was built without coverage (nothing to measure).
int rk_coverage_window_open(void);
/// Writes the counters gathered since the opening to `path` and ends the process's coverage (nothing later is
/// written); 0 on success, -1 without coverage.
int rk_coverage_window_close(const char *path);
