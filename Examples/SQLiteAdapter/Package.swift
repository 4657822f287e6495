// swift-tools-version:6.0
import Foundation
import PackageDescription

// ResourceKit by path: the repository two levels up. A path dependency's identity is its directory's name,
// which depends on where the repository was checked out, so it is computed here.
let root = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().deletingLastPathComponent()
let resourceKit = root.lastPathComponent

let package = Package(
    name: "SQLiteAdapter",
    products: [.library(name: "SQLiteAdapter", targets: ["SQLiteAdapter"])],
    dependencies: [.package(path: root.path)],
    targets: [
        // SQLite 3, the system's (`libsqlite3-dev`).
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .target(
            name: "SQLiteAdapter",
            dependencies: [
                "CSQLite",
                .product(name: "ResourceKit", package: resourceKit),
                .product(name: "ResourceKitIO", package: resourceKit),
            ]
        ),
        .testTarget(
            name: "SQLiteAdapterTests",
            dependencies: [
                "SQLiteAdapter", "CSQLite",
                .product(name: "ResourceKit", package: resourceKit),
                .product(name: "ResourceKitIO", package: resourceKit),
                .product(name: "ResourceKitTesting", package: resourceKit),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
