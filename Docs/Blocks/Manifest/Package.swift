// swift-tools-version:6.0
// The guide's "Depending on ResourceKit" block, evaluated as a manifest by `.ci/run`
// (`swift package --package-path Docs/Blocks/Manifest dump-package`). Glue: the `Package(` call around it.
import PackageDescription

let package = Package(  // glue
    name: "MyAdapter",  // glue
    // snippet: guide-manifest
    // Package.swift of your adapter
    dependencies: [.package(path: "../ResourceKit")],
    targets: [
        .target(name: "MyAdapter", dependencies: [
            .product(name: "ResourceKit", package: "ResourceKit"),
            .product(name: "ResourceKitIO", package: "ResourceKit"),  // descriptors, the blocking pool
        ]),
        .testTarget(name: "MyAdapterTests", dependencies: [
            "MyAdapter", .product(name: "ResourceKitTesting", package: "ResourceKit"),
        ]),
    ]
    // end snippet
)  // glue
