import CLibPQ

/// A `PGconn *`. `@unchecked Sendable`: the pointer is only dereferenced by libpq calls made while holding the
/// owning connection's `state` lock (libpq connections are not thread-safe; the lock serialises them).
struct PGConnPointer: @unchecked Sendable {
    let raw: OpaquePointer
}

/// A `PGcancel *`. `@unchecked Sendable`: libpq documents `PQcancel` as safe to call from any thread (it only
/// reads the object); it is freed only after the last cancel request that uses it finished.
struct PGCancelPointer: @unchecked Sendable {
    let raw: OpaquePointer
}
