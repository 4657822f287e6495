// swift-tools-version:6.0
import Foundation
import PackageDescription

// ResourceKit by path: the repository two levels up. A path dependency's identity is its directory's name,
// which depends on where the repository was checked out, so it is computed here.
let root = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().deletingLastPathComponent()
let resourceKit = root.lastPathComponent

let package = Package(
    name: "CurlAdapter",
    products: [.library(name: "CurlAdapter", targets: ["CurlAdapter"])],
    dependencies: [.package(path: root.path)],
    targets: [
        // libcurl, the system's (`libcurl4-openssl-dev`).
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        .target(
            name: "CurlAdapter",
            dependencies: [
                "CCurl",
                .product(name: "ResourceKit", package: resourceKit),
                .product(name: "ResourceKitIO", package: resourceKit),
            ]
        ),
        .testTarget(
            name: "CurlAdapterTests",
            dependencies: [
                "CurlAdapter", "CCurl",
                .product(name: "ResourceKit", package: resourceKit),
                .product(name: "ResourceKitIO", package: resourceKit),
                .product(name: "ResourceKitTesting", package: resourceKit),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
