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

    /// A crowd draining at the descriptor limit: accepts succeed and fail by turns. One pair is reported, not one per
    /// turn; a pause that then lasts is reported, dated from its beginning; one long after the resume is a new
    /// episode.
    @Test func flappingAtTheLimitIsOneEpisode() {
        var backoff = AcceptBackoff()
        #expect(backoff.failed(exhausted, at: start).event == .acceptPaused(exhausted))
        let resumedAt = start + .milliseconds(100)
        #expect(backoff.accepted(at: resumedAt) == .acceptResumed(failures: 1, pausedFor: .milliseconds(100)))
        // Twenty turns within the settling second: silent, and each short pause starts over at 5 ms.
        for turn in 1...20 {
            let at = resumedAt + .milliseconds(turn * 40)
            let failure = backoff.failed(exhausted, at: at)
            #expect(failure.event == nil && failure.delay == .milliseconds(5))
            #expect(backoff.accepted(at: at + .milliseconds(5)) == nil)
        }
        // A pause that begins in the settling second and lasts: reported once it has lasted a second.
        let lasting = resumedAt + .milliseconds(900)
        #expect(backoff.failed(exhausted, at: lasting).event == nil)
        #expect(backoff.failed(exhausted, at: lasting + .milliseconds(500)).event == nil)
        #expect(backoff.failed(exhausted, at: lasting + .seconds(1)).event == .acceptPaused(exhausted))
        #expect(backoff.failed(exhausted, at: lasting + .seconds(2)).event == nil)
        let end = lasting + .milliseconds(2500)
        #expect(backoff.accepted(at: end) == .acceptResumed(failures: 4, pausedFor: .milliseconds(2500)))
        // Long after that resume, a new pause is reported at once.
        #expect(backoff.failed(exhausted, at: end + .seconds(2)).event == .acceptPaused(exhausted))
    }
}
