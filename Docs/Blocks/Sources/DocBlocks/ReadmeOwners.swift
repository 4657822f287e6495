import FileAdapter
import ResourceKit
import ResourceKitPatterns

// README, "Long-lived owners". Glue: the function around the statements, whose parameters are what the block
// names without declaring (the request's id, path and scope, a store, a client, an open connection's handle).

// snippet: readme-owners
func owners(  // glue
    id: Int, path: String, size: Int, store: UploadStore, client: UploadClient,  // glue
    handle: ResourceHandle, requestScope: ResourceScope  // glue
) async throws {  // glue
    let owners = ResourceOwnerGroup()
    let uploads = owners.makeOwner("uploads", gracePeriod: .seconds(10), watchdog: .seconds(2))

    // In a request handler: starting "upload-42" twice runs it once.
    let upload = try uploads.run(key: "upload-\(id)") { work in
        let file = try await FileReader.open(path: path, in: work.scope)   // lives as long as the upload
        for try await chunk in file.chunks() {
            try await store.append(chunk)
            work.report(progress: Double(try await store.count) / Double(size))   // 0...1
        }
    }
    try await client.send("ACCEPTED")                                    // the request ends; the upload goes on

    // Adoption: a connection opened in the request's scope, kept by the owner (closed at its shutdown).
    try uploads.adopt(handle, from: requestScope)

    // At process exit:
    for report in await owners.shutdown() { try report.check() }
    _ = upload  // glue
}  // glue
// end snippet

/// Where the reader's uploads go.
protocol UploadStore: Sendable {
    func append(_ chunk: [UInt8]) async throws
    var count: Int { get async throws }
}

/// The reader's client connection.
protocol UploadClient: Sendable {
    func send(_ text: String) async throws
}
