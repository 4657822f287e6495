import Foundation
import Testing

@testable import resource_bench

/// The benchmark gate's verdicts as a pure function: a row is judged by the median of its runs' ratios, so one
/// disturbed run neither fails a row nor hides a regression that shows in most runs.
@Suite struct BenchCheckTests {
    static let thresholds = BenchCheck.Thresholds(
        mode: "quick", core: true, tolerance: "test",
        rows: [
            .init(figure: "read", reference: "floor", recorded: 1.5, atMost: 4.0, atLeast: nil, why: "test"),
            .init(figure: "queries", reference: "threads", recorded: 1.1, atMost: nil, atLeast: 0.6, why: "test"),
        ])

    /// One run's rows: the read at `read` times its floor, the queries at `queries` times the threads'.
    static func run(read: Double, queries: Double?) -> [BenchRow] {
        var rows = [
            BenchRow(
                figure: Samples("read", unit: "us", values: [read]),
                reference: Samples("floor", unit: "us", values: [1]),
                target: nil)
        ]
        if let queries {
            rows.append(
                BenchRow(
                    figure: Samples("queries", unit: "qps", values: [queries]),
                    reference: Samples("threads", unit: "qps", values: [1]), target: nil))
        }
        return rows
    }

    @Test func oneRunIsJudgedByItsOwnRatio() {
        let verdicts = BenchCheck.verdicts(Self.thresholds, [Self.run(read: 4.5, queries: 1.0)])
        #expect(verdicts.map(\.passed) == [false, true])
        #expect(verdicts[0].ratio == 4.5)
    }

    @Test func oneDisturbedRunOfThreeDoesNotFailARow() {
        let runs = [
            Self.run(read: 4.6, queries: 0.5), Self.run(read: 1.4, queries: 1.1), Self.run(read: 1.6, queries: 1.0),
        ]
        let verdicts = BenchCheck.verdicts(Self.thresholds, runs)
        #expect(verdicts.map(\.passed) == [true, true])
        #expect(verdicts[0].ratio == 1.6)
        #expect(BenchCheck.ratioCell(verdicts[0]) == "1.600 (4.600, 1.400, 1.600)")
    }

    @Test func aRegressionInMostRunsStillFails() {
        let runs = [
            Self.run(read: 4.6, queries: 0.5), Self.run(read: 4.2, queries: 0.55), Self.run(read: 1.6, queries: 1.0),
        ]
        let verdicts = BenchCheck.verdicts(Self.thresholds, runs)
        #expect(verdicts.map(\.passed) == [false, false])
    }

    @Test func aRowARunDidNotMeasureFails() {
        let runs = [
            Self.run(read: 1.5, queries: 1.0), Self.run(read: 1.5, queries: nil), Self.run(read: 1.5, queries: 1.0),
        ]
        let verdicts = BenchCheck.verdicts(Self.thresholds, runs)
        #expect(verdicts.map(\.passed) == [true, false])
        #expect(BenchCheck.ratioCell(verdicts[1]) == "not measured")
    }
}
