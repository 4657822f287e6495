import ResourceKitTesting
import TestSupport
import Testing

@_spi(Testing) @testable import ResourceKit

/// A wait bound to its operation's own resource, in the operation's scope, is reached through the operation: the
/// handle's list holds the operation alone (Docs/Architecture.md, "One route per wait"), while the registry still
/// counts both, and every cancel source that reached the wait before still does. Through a real pipe read.
@Suite struct OneRoutePerWaitTests {
    enum Source: String, CaseIterable {
        case theResource, theTask, theClose
    }

    @Test(arguments: Source.allCases)
    func aWaitOnItsOperationsResourceIsReachedThroughTheOperation(source: Source) async throws {
        let registry = ResourceRegistry()
        let hookRan = OneShotEvent()
        try await withResourceScope("owner", registry: registry) { scope in
            let pipe = try PipeResource()
            let handle = try await scope.register(pipe, kind: PipeResource.kind, label: "pipe")
            let counts = registry.operationCountUpdates()
            // Owner: this test, which cancels and awaits it.
            let read = Task {
                try await withResourceOperation(boundTo: handle, onCancel: { _ in hookRan.set() }) {
                    try await pipe.readByte(boundTo: handle)
                }
            }
            try await until("the operation and its wait are counted", counts) { $0 == 2 }
            #expect(handle.trackedCount == 1, "the handle's list holds the operation, not its wait")
            switch source {
            case .theResource: handle.cancel()
            case .theTask: read.cancel()
            case .theClose: _ = await handle.close()
            }
            await #expect(throws: CancellationError.self) { try await read.value }
            #expect(hookRan.isSet, "the operation's hook ran before its wait resumed")
            #expect(handle.trackedCount == 0)
            try await until("nothing is counted", registry.operationCountUpdates()) { $0 == 0 }
        }
    }
}
