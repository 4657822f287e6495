extension EmbeddedPostgres {
    /// Stops the cluster when the process receives `SIGINT`, `SIGTERM` or `SIGHUP`, removes whatever else this
    /// process left (``Leftovers/removeOwn()``), then lets the signal take its default effect (the process ends
    /// with that signal). For processes with no shutdown path of their own, such as a test runner; a program that
    /// cancels its work on a signal (like `resource-demo`) stops the cluster as part of its orderly shutdown
    /// instead and should not call this.
    ///
    /// The handlers run on a dispatch queue, not in a signal handler, so stopping may block. Calling this for
    /// several clusters stops each of them.
    public func stopOnTerminationSignals() {
        Leftovers.onTerminationSignal { [self] in stopBlocking() }
    }
}
