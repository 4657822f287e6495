// swift-tools-version:6.0
import Foundation
import PackageDescription

// The Swift blocks of README.md and Docs/WritingAnAdapter.md, compiled (`swift build --package-path Docs/Blocks`,
// a step of `.ci/run`). Each block is a region between `// snippet: name` and `// end snippet` whose lines, less
// those ending in `// glue` (the reader's obvious glue: a function around statements, a namespace around a
// declaration), are the block's lines; `GuideSnippetTests` in the root package checks that they match.
//
// ResourceKit by path: the repository two levels up (a path dependency's identity is its directory's name).
let root = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().deletingLastPathComponent()
let resourceKit = root.lastPathComponent

let package = Package(
    name: "DocBlocks",
    dependencies: [.package(path: root.path)],
    targets: [
        // Stand-ins with the few signatures of swift-log and swift-metrics that README's event-sink block uses:
        // those packages cannot be fetched here, and the package does not depend on them.
        .target(name: "Logging", path: "Sources/Logging"),
        .target(name: "Metrics", path: "Sources/Metrics"),
        .target(
            name: "DocBlocks",
            dependencies: [
                "Logging", "Metrics",
                .product(name: "ResourceKit", package: resourceKit),
                .product(name: "ResourceKitIO", package: resourceKit),
                .product(name: "ResourceKitPatterns", package: resourceKit),
                .product(name: "ResourceKitObservation", package: resourceKit),
                .product(name: "SocketAdapter", package: resourceKit),
                .product(name: "FileAdapter", package: resourceKit),
                .product(name: "PostgresAdapter", package: resourceKit),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
