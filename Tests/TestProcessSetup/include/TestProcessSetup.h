// Nothing to call: the target's constructor sets the test process up (SIGPIPE ignored) before any test runs.
