/// Bounds for timing assertions in tests. Time is measured precisely in `resource-demo bench`; tests only
/// tell "returned promptly" from "waited for a timeout or hung", so the bounds are generous: the suite runs
/// with every test in parallel on a 2-core machine, sometimes under the thread sanitizer.
public enum TimingBound {
    /// One cancel-to-return measurement outside the benchmark: a path that works returns in well under a
    /// millisecond; a path that is broken waits for the operation's own timeout (20 s or more in the tests).
    /// 10 s: validation runs measured stalls of the whole process of 1.046 s (two tests at the same moment), then
    /// 5.4 s and 5.6 s under the thread sanitizer (a 300 ms deadline returned after 5.58 s), and 10 s still tells
    /// a prompt return from a timeout of 20 s or more.
    public static let singleShot: Duration = .seconds(10)

    /// The median, over several rounds taken while holding the test gate, of a cancel-to-return latency's excess
    /// over a reference task cancelled at the same instant (``CancelMeasurement/excess``): what the path under
    /// test costs beyond the scheduler. A path that polls or waits for a timeout exceeds it.
    public static let median: Duration = .milliseconds(50)
}
