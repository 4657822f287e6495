import Foundation
import Testing

@testable import resource_bench

/// The benchmark gate's verdicts as a pure function: a row is judged by the median of its runs' ratios, so one
/// disturbed run neither fails a row nor hides a regression that shows in most runs.
@Suite struct BenchCheckTests {
    static let thresholds = BenchCheck.Thresholds(
        mode: "quick", core: true, tolerance: "test",
        rows: [
            .init(
                figure: "read", reference: "floor", recorded: 1.5, busy: nil, goal: nil, atMost: 4.0, atLeast: nil,
                why: "test"),
            .init(
                figure: "queries", reference: "threads", recorded: 1.1, busy: nil, goal: nil, atMost: nil,
                atLeast: 0.6, why: "test"),
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

    /// A bound sits at the goal when the row meets it with a 1.25x margin, else at most 1.25x from the worse of
    /// its quiet and busy figures; a tighter bound is allowed, a looser one is refused.
    @Test func aBoundIsNoLooserThanItsGoalAndItsFiguresAllow() {
        func bound(recorded: Double, busy: Double?, goal: Double?, atMost: Double? = nil, atLeast: Double? = nil)
            -> BenchCheck.Bound
        {
            .init(
                figure: "f", reference: "r", recorded: recorded, busy: busy, goal: goal, atMost: atMost,
                atLeast: atLeast, why: "test")
        }
        // Meets its goal with margin: bound at the goal.
        #expect(BenchCheck.loosestAllowed(bound(recorded: 0.03, busy: 0.01, goal: 0.5, atMost: 0.5)) == 0.5)
        #expect(BenchCheck.followsTheRule(bound(recorded: 0.03, busy: 0.01, goal: 0.5, atMost: 0.5)))
        #expect(!BenchCheck.followsTheRule(bound(recorded: 0.03, busy: 0.01, goal: 0.5, atMost: 0.8)))
        // On its goal within noise, or past it: 1.25x the worse figure.
        #expect(BenchCheck.followsTheRule(bound(recorded: 1.45, busy: 1.5, goal: 1.5, atMost: 1.88)))
        #expect(!BenchCheck.followsTheRule(bound(recorded: 1.45, busy: 1.5, goal: 1.5, atMost: 4.0)))
        #expect(BenchCheck.followsTheRule(bound(recorded: 0.48, busy: 0.41, goal: 1.0, atLeast: 0.33)))
        #expect(!BenchCheck.followsTheRule(bound(recorded: 0.48, busy: 0.41, goal: 1.0, atLeast: 0.25)))
        // Tighter than the rule is allowed.
        #expect(BenchCheck.followsTheRule(bound(recorded: 0.65, busy: 0.68, goal: 0.95, atLeast: 0.6)))
        // A row without a goal is held at 1.25x its figure.
        #expect(!BenchCheck.followsTheRule(bound(recorded: 1.31, busy: nil, goal: nil, atMost: 2.0)))
    }

    /// The checked-in thresholds follow the rule (`--check` refuses them otherwise, so CI would fail late).
    @Test func theCheckedInThresholdsFollowTheRule() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Benchmarks/Thresholds/linux-2core.json")
        let thresholds = try BenchCheck.load(file.path)
        #expect(thresholds.rows.count >= 14)
        for bound in thresholds.rows {
            #expect(BenchCheck.followsTheRule(bound), "\(bound.figure) / \(bound.reference)")
        }
    }

    /// A row measured in paired rounds is judged by the median of its rounds' ratios, not by the ratio of its two
    /// medians: the rounds where the machine slowed under one side only (the second and fourth here) drop out.
    @Test func pairedRoundsAreJudgedByTheirOwnRatios() {
        let scope = Samples("read", unit: "ns", values: [400, 900, 410, 420, 395])
        let bare = Samples("floor", unit: "ns", values: [100, 100, 102, 60, 99])
        let pairs = zip(scope.values, bare.values).map { $0 / $1 }
        let paired = BenchRow(figure: scope, reference: bare, target: .ratioAtMost(5), pairedRatios: pairs)
        let apart = BenchRow(figure: scope, reference: bare, target: .ratioAtMost(5))
        #expect(paired.ratio == 410.0 / 102)
        #expect(apart.ratio == 410.0 / 100)
        let verdicts = BenchCheck.verdicts(Self.thresholds, [[paired]])
        #expect(verdicts[0].ratio == 410.0 / 102)
        #expect(verdicts[0].passed == false)
    }

    /// Paired rounds rotate which side runs first, and hand each round back in side order.
    @Test func roundsRotateTheFirstSideAndReturnSideOrder() async {
        var order: [Int] = []
        let rounds = await rotatingRounds(3, sides: 2) { side in
            order.append(side)
            return side * 10
        }
        #expect(order == [0, 1, 1, 0, 0, 1])
        #expect(rounds == [[0, 10], [0, 10], [0, 10]])
    }
}
