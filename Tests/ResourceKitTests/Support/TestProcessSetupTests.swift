import Glibc
import TestSupport
import Testing

/// The test process ignores SIGPIPE (`Tests/TestProcessSetup`): tests write to pipes and sockets whose readers
/// they close on purpose, and such a write must fail with EPIPE instead of killing the whole run.
@Suite struct TestProcessSetupTests {
    @Test func aWriteToAPipeWithoutReaderFailsWithEPIPE() {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        close(ends[0])
        var byte: UInt8 = 1
        let written = write(ends[1], &byte, 1)
        let error = errno
        close(ends[1])
        #expect(written == -1)
        #expect(error == EPIPE)
    }
}
