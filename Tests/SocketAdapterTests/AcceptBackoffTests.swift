import Glibc
@testable import SocketAdapter
import Testing

/// The accept loop's backoff as a value: delays, and one report per end of a pause.
@Suite struct AcceptBackoffTests {
    let exhausted = SocketError.from(errno: EMFILE, call: "accept")
    let start = ContinuousClock.now

    @Test func delaysDoubleFromFiveMillisecondsToOneSecond() {
        var backoff = AcceptBackoff()
        let delays = (0..<10).map { _ in backoff.failed(exhausted, at: start).delay }
        let expected: [Duration] = [5, 10, 20, 40, 80, 160, 320, 640, 1000, 1000].map { .milliseconds($0) }
        #expect(delays == expected)
    }

    @Test func aPauseIsReportedOnceWhenItBeginsAndOnceWhenItEnds() {
        var backoff = AcceptBackoff()
        #expect(backoff.accepted(at: start) == nil, "no pause, nothing to report")
        #expect(backoff.failed(exhausted, at: start).event == .acceptPaused(exhausted))
        for _ in 0..<99 { #expect(backoff.failed(exhausted, at: start).event == nil) }
        #expect(backoff.isPaused && backoff.failures == 100)
        let resumed = backoff.accepted(at: start + .milliseconds(1500))
        #expect(resumed == .acceptResumed(failures: 100, pausedFor: .milliseconds(1500)))
        #expect(!backoff.isPaused && backoff.failures == 0)
        #expect(backoff.accepted(at: start) == nil, "reported once")
        #expect(backoff.failed(exhausted, at: start).delay == .milliseconds(5), "a new pause starts over")
    }
}
