import Synchronization

/// One registry's ``KindRecorder``s, by ``ResourceKind/index``, found without a lock and without touching a
/// reference count: every cancelled wait bound to a handle records into its kind's recorder on its way out, and
/// thousands cancelled at once from two cores contended on the registry's lock (and would on a shared reference
/// count) for it (Docs/Architecture.md, "State machines and their owners").
///
/// Kind numbers are dense and process-wide, and a process has a handful of kinds: the first ``lockFreeKinds`` have
/// a slot here; a kind past them keeps its recorder under a lock of its own. A registry makes a kind's recorder
/// when it first sees the kind (``prepare(_:)``, at a registration), so that no cancel pays for it.
struct KindRecorders: ~Copyable, Sendable {
    /// Each slot owns one retain of its recorder (taken when stored, given back in `deinit`).
    private let slots: InlineArray<64, Atomic<Unmanaged<KindRecorder>?>>
    private let later = Mutex<[Int: KindRecorder]>([:])

    /// The number of kinds whose recorder is found without a lock.
    static var lockFreeKinds: Int { InlineArray<64, Atomic<Unmanaged<KindRecorder>?>>.count }

    init() {
        slots = InlineArray { _ in Atomic(nil) }
    }

    deinit {
        for index in slots.indices {
            slots[index].load(ordering: .acquiring)?.release()
        }
    }

    /// Makes the recorder of the kind numbered `index` unless it exists.
    func prepare(_ index: Int) {
        guard index < Self.lockFreeKinds else {
            later.withLock { later in
                if later[index] == nil { later[index] = KindRecorder() }
            }
            return
        }
        guard slots[index].load(ordering: .acquiring) == nil else { return }
        let made = Unmanaged.passRetained(KindRecorder())
        let (stored, _) = slots[index].compareExchange(expected: nil, desired: made, ordering: .acquiringAndReleasing)
        if !stored { made.release() }  // another thread stored one first
    }

    /// Whether the kind numbered `index` has its recorder (lock-free below ``lockFreeKinds``).
    func isPrepared(_ index: Int) -> Bool {
        if index < Self.lockFreeKinds { return slots[index].load(ordering: .acquiring) != nil }
        return later.withLock { $0[index] != nil }
    }

    /// Records `nanoseconds` for the kind numbered `index`. Lock-free for a prepared kind below ``lockFreeKinds``.
    func record(nanoseconds: UInt64, index: Int) {
        if index < Self.lockFreeKinds, let slot = slots[index].load(ordering: .acquiring) {
            // The slot's own retain keeps the recorder alive while `self` lives.
            slot._withUnsafeGuaranteedRef { $0.record(nanoseconds: nanoseconds) }
            return
        }
        prepare(index)
        if index < Self.lockFreeKinds {
            slots[index].load(ordering: .acquiring)?._withUnsafeGuaranteedRef { $0.record(nanoseconds: nanoseconds) }
        } else {
            later.withLock { $0[index] }?.record(nanoseconds: nanoseconds)
        }
    }

    /// Counts one operation of the kind numbered `index`. Lock-free for a prepared kind below ``lockFreeKinds``.
    func record(_ outcome: OperationOutcome, index: Int) {
        if index < Self.lockFreeKinds, let slot = slots[index].load(ordering: .acquiring) {
            slot._withUnsafeGuaranteedRef { $0.record(outcome) }
            return
        }
        prepare(index)
        if index < Self.lockFreeKinds {
            slots[index].load(ordering: .acquiring)?._withUnsafeGuaranteedRef { $0.record(outcome) }
        } else {
            later.withLock { $0[index] }?.record(outcome)
        }
    }

    /// The operations the kind numbered `index` counted so far, by outcome (empty when none).
    func outcomes(at index: Int) -> [OperationOutcome: UInt64] {
        if index < Self.lockFreeKinds {
            return slots[index].load(ordering: .acquiring)?._withUnsafeGuaranteedRef { $0.outcomeCounts() } ?? [:]
        }
        return later.withLock { $0[index] }?.outcomeCounts() ?? [:]
    }

    /// What the kind numbered `index` recorded so far (empty when nothing).
    func reading(at index: Int) -> LatencyBuckets {
        if index < Self.lockFreeKinds {
            let slot = slots[index].load(ordering: .acquiring)
            return slot?._withUnsafeGuaranteedRef { $0.reading() } ?? LatencyBuckets()
        }
        return later.withLock { $0[index] }?.reading() ?? LatencyBuckets()
    }
}
