// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// The runtime libraries' async functions run on their caller's executor (SE-0461's `nonisolated(nonsending)`,
/// the default Swift is moving to) instead of hopping to the generic executor at every call and return: a query
/// passes through a dozen of them, and each hop of a task with an executor preference takes the task's status
/// lock (Docs/Architecture.md, "Where code runs"). Tools and tests keep the Swift 6 default.
let runtime: [SwiftSetting] = strict + [.enableUpcomingFeature("NonisolatedNonsendingByDefault")]

/// What every test target links: the core, the kit, the shared helpers (which bring the I/O runtime, the
/// observation and process modules with them) and the C shim some tests call directly.
let testKit: [Target.Dependency] = [
    "ResourceKit", "ResourceKitIO", "ResourceKitObservation", "ResourceKitProcesses", "ResourceKitTesting",
    "CSystemShims", "TestSupport",
]

let package = Package(
    name: "ResourceKit",
    products: [
        .library(name: "ResourceKit", targets: ["ResourceKit"]),
        .library(name: "ResourceKitIO", targets: ["ResourceKitIO"]),
        .library(name: "ResourceKitPatterns", targets: ["ResourceKitPatterns"]),
        .library(name: "ResourceKitObservation", targets: ["ResourceKitObservation"]),
        .library(name: "ResourceKitPrometheus", targets: ["ResourceKitPrometheus"]),
        .library(name: "ResourceKitProcesses", targets: ["ResourceKitProcesses"]),
        .library(name: "SocketAdapter", targets: ["SocketAdapter"]),
        .library(name: "FileAdapter", targets: ["FileAdapter"]),
        .library(name: "PostgresAdapter", targets: ["PostgresAdapter"]),
        // Fixtures, not API (the `_` says so, as postgres-nio's `_ConnectionPoolTestUtils` does): a throwaway
        // PostgreSQL cluster (initdb, pg_ctl) for tests and demos, and pg_stat_activity as a probe (is
        // server-side work still running?) for tests and adapter kits. Neither is needed to use the adapter.
        .library(name: "_EmbeddedPostgres", targets: ["EmbeddedPostgres"]),
        .library(name: "ResourceKitTesting", targets: ["ResourceKitTesting"]),
        .library(name: "_PostgresActivity", targets: ["PostgresActivity"]),
        .executable(name: "resource-demo", targets: ["resource-demo"]),
        .executable(name: "resource-bench", targets: ["resource-bench"]),
    ],
    targets: [
        // The module graph is drawn in Docs/Architecture.md, "Modules".
        // epoll, eventfd, accept4, spawn and inotify helpers that Swift cannot import cleanly (epoll_event is a
        // packed struct on x86_64). Adapters use the typed Swift API over it (`Syscall`), never the shim.
        .target(name: "CSystemShims"),
        // The lifecycle-and-cancellation core: scopes, handles, the registry, cancellation, deadlines, shield.
        .target(
            name: "ResourceKit",
            dependencies: ["CSystemShims"],
            // Every build resumes unsafe continuations and locks a cell with an inline `Mutex`, the
            // synchronisation that ships, so the suite runs it too. The sanitizer passes (Scripts/test
            // --sanitize=...) pass -DRESOURCEKIT_CHECKED_SYNCHRONIZATION for checked continuations and the
            // pthread mutex the thread sanitizer sees: see `WaiterContinuation` and `InlineStateLock`.
            swiftSettings: runtime
        ),
        // The I/O runtime: the epoll reactor, the blocking pool, guarded descriptors, Syscall, byte streams.
        .target(
            name: "ResourceKitIO",
            dependencies: ["ResourceKit", "CSystemShims"],
            swiftSettings: runtime
        ),
        // Task patterns on top of the core: latest-wins tasks, owned background work, outcomes.
        .target(
            name: "ResourceKitPatterns",
            dependencies: ["ResourceKit"],
            swiftSettings: runtime
        ),
        // How an application watches a registry: its snapshot, its event stream, an event sink.
        .target(name: "ResourceKitObservation", dependencies: ["ResourceKit"], swiftSettings: strict),
        // The registry's snapshot as Prometheus text, and the HTTP endpoint that serves it (`MetricsEndpoint`).
        .target(
            name: "ResourceKitPrometheus",
            dependencies: ["ResourceKit", "ResourceKitObservation", "ResourceKitIO", "SocketAdapter"],
            swiftSettings: strict
        ),
        // Child processes (posix_spawn with a clean signal mask and no inherited descriptors), for what spawns:
        // the embedded cluster, the testing kit's peers, the tests.
        .target(
            name: "ResourceKitProcesses",
            dependencies: ["ResourceKit", "ResourceKitIO", "CSystemShims"],
            swiftSettings: strict
        ),
        .target(name: "SocketAdapter", dependencies: ["ResourceKit", "ResourceKitIO"], swiftSettings: runtime),
        // The conformance kit for adapter authors (and for the shipped adapters' own tests).
        .target(
            name: "ResourceKitTesting",
            dependencies: ["ResourceKit", "ResourceKitIO", "ResourceKitObservation", "ResourceKitProcesses"],
            swiftSettings: strict
        ),
        .target(
            name: "FileAdapter",
            dependencies: ["ResourceKit", "ResourceKitIO"],
            swiftSettings: runtime
        ),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(
            name: "PostgresAdapter",
            dependencies: ["ResourceKit", "ResourceKitIO", "CLibPQ"],
            swiftSettings: runtime
        ),
        .target(
            name: "EmbeddedPostgres",
            dependencies: ["ResourceKit", "ResourceKitIO", "ResourceKitProcesses"],
            swiftSettings: strict
        ),
        // Watching a server's backends through pg_stat_activity: for the demo, the benchmark, tests and adapter
        // kits; apart from the production adapter.
        .target(
            name: "PostgresActivity",
            dependencies: ["PostgresAdapter", "ResourceKit"],
            swiftSettings: strict
        ),
        // The CLI's command table and argument parsing, as a library so that they are unit-tested in-process.
        .target(name: "DemoCommandLine", swiftSettings: strict),
        // What the CLI and the benchmark share: console output, signals, the Postgres target, a silent FIFO.
        .target(
            name: "DemoRuntime",
            dependencies: [
                "DemoCommandLine", "ResourceKit", "ResourceKitIO", "PostgresAdapter",
                "EmbeddedPostgres",
            ],
            swiftSettings: strict
        ),
        // The CLI a user installs: it links no testing kit. `resource-demo bench` runs `resource-bench`.
        .executableTarget(
            name: "resource-demo",
            dependencies: [
                "PostgresActivity",
                "ResourceKit", "ResourceKitIO", "ResourceKitPatterns", "ResourceKitObservation",
                "ResourceKitPrometheus", "SocketAdapter", "FileAdapter", "PostgresAdapter", "EmbeddedPostgres",
                "DemoCommandLine", "DemoRuntime",
            ],
            swiftSettings: strict
        ),
        // The benchmark (its own executable: a raw libpq client, an SVG writer, the kit's silent peer).
        .executableTarget(
            name: "resource-bench",
            dependencies: [
                "PostgresActivity",
                "ResourceKit", "ResourceKitIO", "ResourceKitObservation", "ResourceKitProcesses",
                "ResourceKitTesting", "SocketAdapter", "FileAdapter", "PostgresAdapter", "CLibPQ", "DemoCommandLine",
                "DemoRuntime",
            ],
            swiftSettings: strict
        ),
        // A C constructor that ignores SIGPIPE in the test process (see its source); linked through TestSupport.
        .target(name: "TestProcessSetup", path: "Tests/TestProcessSetup"),
        // Helpers shared by the test targets: descriptor inspection, canceller threads, peer processes. The
        // core's tests link only this one (no libpq).
        .target(
            name: "TestSupport",
            dependencies: [
                "ResourceKitIO", "ResourceKitPatterns", "ResourceKitObservation", "ResourceKitPrometheus",
                "ResourceKitProcesses",
                "ResourceKit", "ResourceKitTesting", "EmbeddedPostgres", "TestProcessSetup", "CSystemShims",
            ],
            path: "Tests/TestSupport",
            swiftSettings: strict
        ),
        // Postgres fixtures: the throwaway cluster per test run, PgBouncer, a balancer, namespaced servers.
        .target(
            name: "PostgresTestSupport",
            dependencies: [
                "PostgresActivity",
                "ResourceKitIO", "ResourceKitPatterns", "ResourceKitObservation", "ResourceKitPrometheus",
                "ResourceKitProcesses",
                "TestSupport", "ResourceKit", "ResourceKitTesting", "PostgresAdapter", "EmbeddedPostgres",
            ],
            path: "Tests/PostgresTestSupport",
            swiftSettings: strict
        ),
        // One test target per library module (the core's, the I/O runtime's and the observation module's tests need
        // nothing beyond the shared list); each links what it tests.
        .testTarget(name: "ResourceKitTests", dependencies: testKit, swiftSettings: strict),
        .testTarget(name: "ResourceKitIOTests", dependencies: testKit, swiftSettings: strict),
        .testTarget(
            name: "ResourceKitPatternsTests", dependencies: testKit + ["ResourceKitPatterns"], swiftSettings: strict),
        .testTarget(name: "ResourceKitObservationTests", dependencies: testKit, swiftSettings: strict),
        .testTarget(
            name: "ResourceKitPrometheusTests", dependencies: testKit + ["ResourceKitPrometheus"],
            swiftSettings: strict),
        .testTarget(name: "SocketAdapterTests", dependencies: testKit + ["SocketAdapter"], swiftSettings: strict),
        .testTarget(name: "FileAdapterTests", dependencies: testKit + ["FileAdapter"], swiftSettings: strict),
        .testTarget(
            name: "PostgresAdapterTests",
            dependencies: testKit + [
                "PostgresAdapter", "PostgresActivity", "EmbeddedPostgres", "CLibPQ", "PostgresTestSupport",
            ],
            swiftSettings: strict
        ),
        // A parent process for the crash-only tests: starts one child through Syscall.spawn and waits to be killed.
        .executableTarget(
            name: "rk-spawn-probe",
            dependencies: [
                "ResourceKitIO", "ResourceKitPatterns", "ResourceKitObservation", "ResourceKitPrometheus",
                "ResourceKitProcesses",
                "ResourceKit",
            ],
            path: "Tests/Helpers/SpawnProbe",
            swiftSettings: strict
        ),
        // The reliability suite: random-point cancellation, faults and bad input. Short form by default;
        // RESOURCEKIT_RELIABILITY=long for the long form.
        .testTarget(
            name: "ReliabilityTests",
            dependencies: testKit + [
                "resource-demo", "rk-spawn-probe", "PostgresAdapter", "PostgresActivity", "EmbeddedPostgres",
                "SocketAdapter", "FileAdapter", "ResourceKitPatterns", "PostgresTestSupport",
            ],
            swiftSettings: strict
        ),
        // The conformance kit against seeded bugs.
        .testTarget(name: "ResourceKitTestingTests", dependencies: testKit + ["SocketAdapter"], swiftSettings: strict),
        .testTarget(name: "DemoCommandLineTests", dependencies: ["DemoCommandLine"], swiftSettings: strict),
        // The benchmark gate's verdicts, without a bench run (the executable's module, imported for testing).
        .testTarget(name: "ResourceBenchTests", dependencies: ["resource-bench"], swiftSettings: strict),
        // End-to-end tests of the CLI: they run the built `resource-demo` binary as a process.
        .testTarget(
            name: "ResourceDemoTests",
            dependencies: testKit + ["resource-demo", "PostgresAdapter", "PostgresActivity", "PostgresTestSupport"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
