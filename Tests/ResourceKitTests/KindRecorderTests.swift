import Testing

@testable import ResourceKit
import ResourceKitObservation

/// ``KindRecorder``: the lock-free form of a kind's cancellation latencies reads back as the histogram value
/// the same samples make, loses no sample recorded from many threads at once, and is found for every kind, past
/// the registry's lock-free table too.
@Suite struct KindRecorderTests {
    @Test func hasOneAtomicPerBucketOfTheValue() {
        #expect(KindRecorder.bucketCount == LatencyBuckets.bucketCount)
        #expect(KindRecorder().reading() == LatencyBuckets())
    }

    @Test func readsBackAsTheValueOfTheSameSamples() {
        let samples: [UInt64] = [0, 1, 2, 7, 8, 100, 3_000, 45_678, 45_679, 1_000_000, 10_000_000_000]
        let recorder = KindRecorder()
        var value = LatencyBuckets()
        for sample in samples.shuffled() {
            recorder.record(nanoseconds: sample)
            value.record(nanoseconds: sample)
        }
        let reading = recorder.reading()
        #expect(reading == value)
        #expect(reading.count == UInt64(samples.count))
        #expect(reading.min == .zero)
        #expect(reading.max == .seconds(10))
    }

    @Test func samplesFromManyThreadsAtOnceAreAllCounted() async {
        let recorder = KindRecorder()
        let tasks = 8
        let perTask: UInt64 = 5_000
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<UInt64(tasks) {
                group.addTask {
                    for sample in 1...perTask {
                        recorder.record(nanoseconds: sample * 10 + task)
                    }
                }
            }
        }
        let reading = recorder.reading()
        #expect(reading.count == UInt64(tasks) * perTask)
        let expectedSum = (0..<UInt64(tasks)).reduce(UInt64(0)) { sum, task in
            sum + (1...perTask).reduce(UInt64(0)) { $0 + $1 * 10 + task }
        }
        #expect(reading.sum == .nanoseconds(Int64(expectedSum)))
        #expect(reading.min == .nanoseconds(10))
        #expect(reading.max == .nanoseconds(Int64(perTask * 10 + UInt64(tasks - 1))))
    }

    @Test func everyKindRecordsIncludingOnesPastTheLockFreeTable() {
        let registry = ResourceRegistry()
        // Kind numbers are process-wide: this many new names reach past the table whatever the suite made.
        let kinds = (0...KindRecorders.lockFreeKinds).map { ResourceKind(name: "test.latency.kind.\($0)") }
        let early = kinds.min { $0.index < $1.index }!
        let later = kinds.max { $0.index < $1.index }!
        #expect(later.index >= KindRecorders.lockFreeKinds)
        for kind in [early, later] {
            registry.registerKind(kind)
            registry.recordCancellationLatency(nanoseconds: 1_500, kind: kind)
            registry.recordCancellationLatency(nanoseconds: 2_500, kind: kind)
        }
        let counters = registry.snapshot().counters
        for kind in [early, later] {
            let latency = counters[kind.name]?.cancellationLatency
            #expect(latency?.count == 2, "\(kind.name)")
            #expect(latency?.sum == .nanoseconds(4_000), "\(kind.name)")
        }
        // A kind that recorded nothing reads back empty.
        #expect(counters[kinds[1].name] == nil || counters[kinds[1].name]?.cancellationLatency.count == 0)
    }

    @Test func aKindRecordsBeforeItsRecorderWasPrepared() {
        let recorders = KindRecorders()
        for index in [0, KindRecorders.lockFreeKinds - 1, KindRecorders.lockFreeKinds, 1_000] {
            #expect(recorders.reading(at: index).count == 0)
            recorders.record(nanoseconds: 700, index: index)
            recorders.prepare(index)  // a later prepare keeps what was recorded
            recorders.record(nanoseconds: 900, index: index)
            let reading = recorders.reading(at: index)
            #expect(reading.count == 2, "kind \(index)")
            #expect(reading.min == .nanoseconds(700), "kind \(index)")
            #expect(reading.max == .nanoseconds(900), "kind \(index)")
        }
    }
}
