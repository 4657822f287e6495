public import ResourceKit

extension ResourceKitError.Code {
    /// The ``ResourceOwner`` is shutting down or shut down and takes no more work or resources.
    public static let ownerShutDown = Self("ownerShutDown")
    /// Work with this key is running with a different result type.
    public static let keyInUse = Self("keyInUse")
    /// The handle to adopt is not a live resource of the given scope (or that scope was cancelled).
    public static let notInScope = Self("notInScope")
    /// An owner's shutdown ended with work that ignored cancellation still running.
    public static let shutdownIncomplete = Self("shutdownIncomplete")
}
