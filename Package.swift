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
        .library(name: "ResourceKitTesting", targets: ["ResourceKitTesting"]),
        .executable(name: "resource-demo", targets: ["resource-demo"]),
    ],
    targets: [
        // epoll, eventfd and a few libc helpers that Swift cannot import cleanly
        // (epoll_event is a packed struct on x86_64, errno is a macro).
        .target(name: "CSystemShims"),
        .target(
            name: "ResourceKit",
            dependencies: ["CSystemShims"],
            swiftSettings: strict
        ),
        .target(name: "SocketAdapter", dependencies: ["ResourceKit"], swiftSettings: strict),
        // The conformance kit for adapter authors (and for the shipped adapters' own tests).
        .target(name: "ResourceKitTesting", dependencies: ["ResourceKit"], swiftSettings: strict),
        .target(name: "FileAdapter", dependencies: ["ResourceKit", "CSystemShims"], swiftSettings: strict),
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .target(name: "PostgresAdapter", dependencies: ["ResourceKit", "CLibPQ"], swiftSettings: strict),
        .executableTarget(
            name: "resource-demo",
            dependencies: ["ResourceKit", "CSystemShims", "SocketAdapter", "FileAdapter", "PostgresAdapter", "CLibPQ"],
            swiftSettings: strict
        ),
        // Helpers shared by the test targets: descriptor inspection, canceller threads, peer processes.
        .target(
            name: "TestSupport",
            dependencies: ["ResourceKit", "ResourceKitTesting", "PostgresAdapter"],
            path: "Tests/TestSupport",
            swiftSettings: strict
        ),
        .testTarget(
            name: "ResourceKitTests",
            dependencies: ["ResourceKit", "CSystemShims", "TestSupport"],
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
            dependencies: ["PostgresAdapter", "ResourceKit", "ResourceKitTesting", "CLibPQ", "TestSupport"],
            swiftSettings: strict
        ),
        // The reliability suite: random-point cancellation, faults and bad input. Short form by default;
        // RESOURCEKIT_RELIABILITY=long for the long form.
        .testTarget(
            name: "ReliabilityTests",
            dependencies: ["resource-demo", "PostgresAdapter", "SocketAdapter", "FileAdapter", "ResourceKit", "TestSupport"],
            swiftSettings: strict
        ),
        // The conformance kit against seeded bugs.
        .testTarget(
            name: "ResourceKitTestingTests",
            dependencies: ["ResourceKitTesting", "ResourceKit", "CSystemShims", "TestSupport"],
            swiftSettings: strict
        ),
        // End-to-end tests of the CLI: they run the built `resource-demo` binary as a process.
        .testTarget(
            name: "ResourceDemoTests",
            dependencies: ["resource-demo", "PostgresAdapter", "ResourceKit", "TestSupport"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
