public import ResourceKit

extension ResourceKitError.Code {
    /// The I/O reactor could not be started (epoll or eventfd failed, usually for lack of descriptors).
    public static let reactorUnavailable = Self("reactorUnavailable")
    /// The descriptor a waiter was waiting on was closed (or closed and reused) under it.
    public static let descriptorClosed = Self("descriptorClosed")
    /// Another task is already waiting for the same readiness on the same descriptor.
    public static let alreadyWaiting = Self("alreadyWaiting")
    /// The descriptor cannot be waited on (a regular file or a directory): use the blocking pool.
    public static let notPollable = Self("notPollable")
    /// The descriptor number is not open.
    public static let badDescriptor = Self("badDescriptor")
    /// A driven loop's wait named no descriptor and no timer: nothing but a cancel could end it.
    public static let nothingToWaitFor = Self("nothingToWaitFor")
    /// The blocking pool was shut down.
    public static let blockingPoolShutDown = Self("blockingPoolShutDown")
    /// The blocking pool's queue is full.
    public static let blockingPoolFull = Self("blockingPoolFull")
    /// A ``ServerStop``'s drain failed or gave up: what the server still does for the connection is unknown, so
    /// no operation runs on it. Reconnect, or close it.
    public static let connectionBroken = Self("connectionBroken")
    /// The ``ServerStop`` (and so its connection) was closed.
    public static let serverStopClosed = Self("serverStopClosed")
}
