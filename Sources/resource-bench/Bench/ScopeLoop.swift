import DemoRuntime
import Foundation
import ResourceKit

extension Bench {
    /// `resource-bench --scopes N`: the bench's "scope + register + close a no-op resource" figure alone, N scopes in
    /// batches of 1,000 beside as many of its plain-mechanics reference, interleaved batch by batch. Prints each one's
    /// median per scope, so that `perf stat` or `perf record` can look at the scope's path without the rest of the
    /// bench:
    ///
    /// ```
    /// perf record -g .build/release/resource-bench --scopes 2000000
    /// ```
    static func scopes(count: Int) async throws {
        let batch = 1_000
        let (scope, _, _, plain) = try await ScopeBench.run(operations: batch, batches: max(1, count / batch))
        let (ours, reference) = (scope.median, plain.median)
        let figures = String(
            format: "scope + register + close %.0f ns, plain mechanics %.0f ns, ratio %.3f", ours, reference,
            ours / reference)
        Console.line("\(count) scopes, medians per scope: \(figures)")
    }
}
