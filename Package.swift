// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "ResourceKit",
    products: [
        .library(name: "ResourceKit", targets: ["ResourceKit"]),
        .library(name: "SocketAdapter", targets: ["SocketAdapter"]),
        .library(name: "FileAdapter", targets: ["FileAdapter"]),
        .library(name: "PostgresAdapter", targets: ["PostgresAdapter"]),
        // A throwaway PostgreSQL cluster (initdb, pg_ctl) for tests and demos; not needed to use the adapter.
        .library(name: "EmbeddedPostgres", targets: ["EmbeddedPostgres"]),
        .library(name: "ResourceKitTesting", targets: ["ResourceKitTesting"]),
        .executable(name: "resource-demo", targets: ["resource-demo"]),
    ],
    targets: [
        // epoll, eventfd, accept4 and inotify helpers that Swift cannot import cleanly (epoll_event is a packed
        // struct on x86_64). Only ResourceKit imports it; adapters use its typed Swift API (`Syscall`).
        .target(name: "CSystemShims"),
        .target(
            name: "ResourceKit",
            dependencies: ["CSystemShims"],
            swiftSettings: strict
        ),
        .target(name: "SocketAdapter", dependencies: ["ResourceKit"], swiftSettings: strict),
        // The conformance kit for adapter authors (and for the shipped adapters' own tests).
        .target(name: "ResourceKitTesting", dependencies: ["ResourceKit"], swiftSettings: strict),
        .target(name: "FileAdapter", dependencies: ["ResourceKit"], swiftSettings: strict),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(name: "PostgresAdapter", dependencies: ["ResourceKit", "CLibPQ"], swiftSettings: strict),
        .target(name: "EmbeddedPostgres", dependencies: ["ResourceKit"], swiftSettings: strict),
        // The CLI's command table and argument parsing, as a library so that they are unit-tested in-process.
        .target(name: "DemoCommandLine", swiftSettings: strict),
        .executableTarget(
            name: "resource-demo",
            dependencies: [
                "ResourceKit", "ResourceKitTesting", "SocketAdapter", "FileAdapter", "PostgresAdapter",
                "EmbeddedPostgres", "CLibPQ", "DemoCommandLine",
            ],
            swiftSettings: strict
        ),
        // Helpers shared by the test targets: descriptor inspection, canceller threads, peer processes. The
        // core's tests link only this one (no libpq).
        .target(
            name: "TestSupport",
            dependencies: ["ResourceKit", "ResourceKitTesting", "EmbeddedPostgres"],
            path: "Tests/TestSupport",
            swiftSettings: strict
        ),
        // Postgres fixtures: the throwaway cluster per test run, PgBouncer, a balancer, namespaced servers.
        .target(
            name: "PostgresTestSupport",
            dependencies: ["TestSupport", "ResourceKit", "PostgresAdapter", "EmbeddedPostgres"],
            path: "Tests/PostgresTestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "ResourceKitTests",
            dependencies: ["ResourceKit", "ResourceKitTesting", "CSystemShims", "TestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SocketAdapterTests",
            dependencies: ["SocketAdapter", "ResourceKit", "ResourceKitTesting", "CSystemShims", "TestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "FileAdapterTests",
            dependencies: ["FileAdapter", "ResourceKit", "ResourceKitTesting", "CSystemShims", "TestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "PostgresAdapterTests",
            dependencies: [
                "PostgresAdapter", "EmbeddedPostgres", "ResourceKit", "ResourceKitTesting", "CLibPQ", "TestSupport",
                "PostgresTestSupport",
            ],
            swiftSettings: strict
        ),
        // A parent process for the crash-only tests: starts one child through Syscall.spawn and waits to be killed.
        .executableTarget(
            name: "rk-spawn-probe",
            dependencies: ["ResourceKit"],
            path: "Tests/Helpers/SpawnProbe",
            swiftSettings: strict
        ),
        // The reliability suite: random-point cancellation, faults and bad input. Short form by default;
        // RESOURCEKIT_RELIABILITY=long for the long form.
        .testTarget(
            name: "ReliabilityTests",
            dependencies: [
                "resource-demo", "rk-spawn-probe", "PostgresAdapter", "EmbeddedPostgres", "SocketAdapter",
                "FileAdapter", "ResourceKit",
                "ResourceKitTesting", "TestSupport",
                "PostgresTestSupport",
            ],
            swiftSettings: strict
        ),
        // The conformance kit against seeded bugs.
        .testTarget(
            name: "ResourceKitTestingTests",
            dependencies: ["ResourceKitTesting", "ResourceKit", "SocketAdapter", "CSystemShims", "TestSupport"],
            swiftSettings: strict
        ),
        .testTarget(name: "DemoCommandLineTests", dependencies: ["DemoCommandLine"], swiftSettings: strict),
        // End-to-end tests of the CLI: they run the built `resource-demo` binary as a process.
        .testTarget(
            name: "ResourceDemoTests",
            dependencies: [
                "resource-demo", "PostgresAdapter", "ResourceKit", "ResourceKitTesting", "TestSupport",
                "PostgresTestSupport",
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
