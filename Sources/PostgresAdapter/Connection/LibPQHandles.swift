import CLibPQ

/// A `PGconn *`. `@unchecked Sendable`: libpq connections are not thread-safe, so every libpq call on it is
/// serialised: while open, the calls are made holding the owning connection's `state` lock; `close()` takes
/// the pointer out of the state under that lock (so no other call can reach it any more) and only then calls
/// `PQfinish` outside the lock, as the sole remaining user.
struct PGConnPointer: @unchecked Sendable {
    let raw: OpaquePointer
}

/// A `PGcancel *`. `@unchecked Sendable`: libpq documents `PQcancel` as safe to call from any thread (it only
/// reads the object); it is freed only after the last cancel request that uses it finished. Equal when they are
/// the same object.
struct PGCancelPointer: @unchecked Sendable, Equatable {
    let raw: OpaquePointer
}
