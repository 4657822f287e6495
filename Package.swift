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
        .executableTarget(
            name: "resource-demo",
            dependencies: ["ResourceKit", "CSystemShims"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "ResourceKitTests",
            dependencies: ["ResourceKit", "CSystemShims"],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
