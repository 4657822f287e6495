import DemoRuntime
import Foundation
import ResourceKit

extension Bench {
    /// `resource-bench --scopes N`: the bench's scope rounds alone (``ScopeBench/run(operations:rounds:)``), N scopes
    /// in rounds of 1,000, each round beside its three references. Prints the scope's and the plain mechanics' median
    /// per scope and the median of the rounds' ratios, so that `perf stat` or `perf record` can look at the scope's
    /// path without the rest of the bench:
    ///
    /// ```
    /// perf record -g .build/release/resource-bench --scopes 2000000
    /// ```
    static func scopes(count: Int) async throws {
        let batch = 1_000
        let figures = try await ScopeBench.run(operations: batch, rounds: max(1, count / batch))
        let ratio = Samples("ratio", unit: "x", values: figures.scopeOverPlain).median
        let text = String(
            format: "scope + register + close %.0f ns, plain mechanics %.0f ns, ratio %.3f", figures.scope.median,
            figures.plain.median, ratio)
        Console.line("\(count) scopes, medians per scope: \(text)")
    }
}
