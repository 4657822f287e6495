// swift-tools-version:6.0
import Foundation
import PackageDescription

// ResourceKit by path: the repository two levels up. A path dependency's identity is its directory's name,
// which depends on where the repository was checked out, so it is computed here.
let root = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().deletingLastPathComponent()
let resourceKit = root.lastPathComponent

let package = Package(
    name: "RedisAdapter",
    products: [.library(name: "RedisAdapter", targets: ["RedisAdapter"])],
    dependencies: [.package(path: root.path)],
    targets: [
        // hiredis, the system's (`libhiredis-dev`), found in /usr/include and linked by the module map. Not through
        // pkg-config: its flags carry `-D_FILE_OFFSET_BITS=64`, which SwiftPM refuses with a warning.
        .systemLibrary(name: "CHiredis", providers: [.apt(["libhiredis-dev"])]),
        .target(
            name: "RedisAdapter",
            dependencies: [
                "CHiredis",
                .product(name: "ResourceKit", package: resourceKit),
                .product(name: "ResourceKitIO", package: resourceKit),
            ]
        ),
        .testTarget(
            name: "RedisAdapterTests",
            dependencies: [
                "RedisAdapter", "CHiredis",
                .product(name: "ResourceKit", package: resourceKit),
                .product(name: "ResourceKitIO", package: resourceKit),
                .product(name: "ResourceKitProcesses", package: resourceKit),
                .product(name: "ResourceKitTesting", package: resourceKit),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
