import Glibc
import ResourceKit

// The guide, "Register in the scope you are given". Glue: a stand-in for the process example's `ChildProcess`
// (its real code is in Examples/ProcessAdapter) around the block's two halves, and the function that opens it.

final class ChildProcess: ManagedResource {  // glue
    // snippet: guide-registration
    public static let kind = ResourceKind(name: "example.process", closeTimeout: .seconds(10))

    static func spawn(  // glue
        pid: pid_t, stdout: [Int32], stdin: [Int32], grace: Duration, in scope: ResourceScope  // glue
    ) async throws -> ChildProcess {  // glue
        let child = ChildProcess(pid: pid, output: stdout[0], input: stdin[1], grace: grace)
        let handle = try await scope.register(child, kind: kind, label: "child process")  // labels carry no user data
        _ = handle  // glue
        return child  // glue
    }  // glue
    // end snippet

    init(pid: pid_t, output: Int32, input: Int32, grace: Duration) {}
    func cancel() {}
    func close() async throws {}
}
