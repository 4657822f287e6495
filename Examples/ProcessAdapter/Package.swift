// swift-tools-version:6.0
import Foundation
import PackageDescription

// ResourceKit by path: the repository two levels up. A path dependency's identity is its directory's name,
// which depends on where the repository was checked out, so it is computed here.
let root = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().deletingLastPathComponent()
let resourceKit = root.lastPathComponent

let package = Package(
    name: "ProcessAdapter",
    products: [.library(name: "ProcessAdapter", targets: ["ProcessAdapter"])],
    dependencies: [.package(path: root.path)],
    targets: [
        .target(
            name: "ProcessAdapter",
            dependencies: [
                .product(name: "ResourceKit", package: resourceKit),
                .product(name: "ResourceKitIO", package: resourceKit),
                .product(name: "ResourceKitProcesses", package: resourceKit),
            ]
        ),
        .testTarget(
            name: "ProcessAdapterTests",
            dependencies: [
                "ProcessAdapter",
                .product(name: "ResourceKit", package: resourceKit),
                .product(name: "ResourceKitIO", package: resourceKit),
                .product(name: "ResourceKitTesting", package: resourceKit),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
