import Testing

@testable import resource_bench

/// The rows against the threads are measured in rounds of their own: each round runs every figure's load and the
/// threads' once, rotating which goes first, and each figure keeps only these rounds' samples and ratios.
@Suite struct AgainstThreadsTests {
    @Test func eachRoundRunsEverySideOnceAndTheFiguresKeepOnlyTheirRounds() async throws {
        var leased = BulkBench.Concurrency(tasks: 64)
        leased.oursQPS.values = [1, 2]  // the sweep's batches: replaced, not kept
        let shared = BulkBench.Concurrency(tasks: 32, placement: .shared)
        var sides: [Int] = []  // in the order they ran: a figure's by its task count, the threads' as 0
        let measured = try await BulkBench.againstThreads(
            [leased, shared], rounds: 3, queries: 10,
            load: { sides.append($0.tasks) },
            threads: { sides.append(0) })
        #expect(sides == [64, 32, 0, 32, 0, 64, 0, 64, 32])
        #expect(measured.map(\.tasks) == [64, 32])
        #expect(measured.map(\.placement) == [.cooperative, .shared])
        for figure in measured {
            #expect(figure.oursQPS.values.count == 3)
            #expect(figure.rawQPS.values.count == 3)
            #expect(figure.oursCPU.values.count == 3)
            #expect(figure.qpsRatios?.count == 3)
            let row = BenchRow(
                figure: figure.oursQPS, reference: figure.rawQPS, target: .ratioAtLeast(1),
                pairedRatios: figure.qpsRatios)
            let expected = Samples("ratio", unit: "x", values: figure.qpsRatios ?? []).median
            #expect(row.ratio == expected)
        }
    }
}
