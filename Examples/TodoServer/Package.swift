// swift-tools-version:6.0
import Foundation
import PackageDescription

// ResourceKit by path: the repository two levels up. A path dependency's identity is its directory's name,
// which depends on where the repository was checked out, so it is computed here.
let root = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().deletingLastPathComponent()
let resourceKit = root.lastPathComponent

/// What the service, the executable and the tests all use.
let kit: [Target.Dependency] = ["ResourceKit", "ResourceKitIO", "SocketAdapter", "PostgresAdapter"].map {
    .product(name: $0, package: resourceKit)
}

let package = Package(
    name: "TodoServer",
    products: [.executable(name: "todo-server", targets: ["todo-server"])],
    dependencies: [.package(path: root.path)],
    targets: [
        // The service (what a request does) and the server (its plumbing), as a library so that the tests run it
        // in-process.
        .target(
            name: "TodoService",
            dependencies: kit + [.product(name: "ResourceKitPrometheus", package: resourceKit)]
        ),
        .executableTarget(
            name: "todo-server",
            dependencies: kit + ["TodoService"]
        ),
        .testTarget(
            name: "TodoServiceTests",
            dependencies: kit + [
                "TodoService",
                .product(name: "_EmbeddedPostgres", package: resourceKit),
                .product(name: "_PostgresActivity", package: resourceKit),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
