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
}
