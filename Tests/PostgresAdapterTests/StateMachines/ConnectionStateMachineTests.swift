import Testing

@testable import PostgresAdapter

/// The connection's rules as a pure value: no server, no I/O.
@Suite struct ConnectionStateMachineTests {
    private let now = ContinuousClock.now

    private func sentQuery(_ machine: inout ConnectionStateMachine) -> UInt64 {
        let step1 = machine.begin()
        #expect(step1 == .ready)
        return machine.sent()
    }

    @Test func aQueryRunsAndEndsWithoutCancel() {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        #expect(machine.queryOnWire == id)
        let step2 = machine.resultsEnded(id)
        #expect(step2 == (ended: true, ourCancel: false))
        machine.end()
        let step3 = machine.begin()
        #expect(step3 == .ready)
    }

    @Test func cancelBeforeSendSendsNothing() {
        var machine = ConnectionStateMachine.keyed()
        #expect(machine.cancelRequested(1, now: now) == .none)  // nothing on the wire yet
        #expect(machine.cancelsInFlight == 0)
    }

    @Test func cancelDuringAQueryIsSentOnceAndItsErrorIsOurs() throws {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        let step4 = machine.cancelRequested(id, now: now)
        #expect(step4 == .send(id, .keyed))
        #expect(machine.cancelRequested(id, now: now) == .none)  // a second trigger while one is in flight
        let step5 = machine.resultsEnded(id)
        #expect(step5 == (ended: true, ourCancel: true))
        machine.end()
        // The next query must wait for the cancel's EOF, although ReadyForQuery was seen.
        let step6 = machine.begin()
        #expect(step6 == .cleanUpFirst)
        let step7 = machine.nextCleanupStep()
        let settlement = try #require(step7.settlement, "waits for the cancel in flight")
        let step8 = machine.cancelFinished()
        #expect(step8 == .cancelsSettled(settlement), "the last cancel sets what the cleanup waits on")
        let step9 = machine.nextCleanupStep()
        #expect(step9 == .done)
    }

    /// A shared batch's later statements get cancels of their own (`another`), even while one is in flight; each
    /// is counted, and the next operation waits for all of them. Nothing once the batch left the wire.
    @Test func anotherCancelForTheSameBatchIsSentAndCountedUntilItEnds() throws {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        #expect(machine.cancelRequested(id, another: true, now: now) == .send(id, .keyed))
        #expect(machine.cancelRequested(id, another: true, now: now) == .send(id, .keyed))
        #expect(machine.cancelsInFlight == 2)
        let ended = machine.resultsEnded(id)
        #expect(ended == (ended: true, ourCancel: true))
        #expect(machine.cancelRequested(id, another: true, now: now) == .none)
        machine.end()
        let step = machine.begin()
        #expect(step == .cleanUpFirst)
        #expect(machine.cancelFinished() == .none)
        let settlement = try #require(machine.nextCleanupStep().settlement, "one cancel is still in flight")
        #expect(machine.cancelFinished() == .cancelsSettled(settlement))
        #expect(machine.nextCleanupStep() == .done)
    }

    @Test func cancelAfterCompletionSendsNothing() {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        _ = machine.resultsEnded(id)
        let step10 = machine.cancelRequested(id, now: now)
        #expect(step10 == .none)
        machine.end()
        let step11 = machine.begin()
        #expect(step11 == .ready)
    }

    @Test func aLateCancelForAnOldQueryNeverTargetsTheNextOne() {
        var machine = ConnectionStateMachine.keyed()
        let first = sentQuery(&machine)
        _ = machine.resultsEnded(first)
        machine.end()
        let second = sentQuery(&machine)
        let step12 = machine.cancelRequested(first, now: now)
        #expect(step12 == .none)
        let step13 = machine.resultsEnded(second)
        #expect(step13 == (ended: true, ourCancel: false))
    }

    @Test func aCallerThatLeavesLeavesADrainAndTheCancelGuard() {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        let step14 = machine.cancelRequested(id, now: now)
        #expect(step14 == .send(id, .keyed))
        machine.operationLeft(id)
        machine.end()
        #expect(machine.wire == .abandoned(id))
        let step15 = machine.begin()
        #expect(step15 == .cleanUpFirst)
        let step16 = machine.nextCleanupStep()
        #expect(step16.settlement != nil)
        _ = machine.cancelFinished()
        let step17 = machine.nextCleanupStep()
        #expect(step17 == .drain(id))
        let step18 = machine.resultsEnded(id)
        #expect(step18.ended)
        let step19 = machine.nextCleanupStep()
        #expect(step19 == .done)
        let step20 = machine.sent()
        #expect(step20 == id + 1)
    }

    @Test func aResendIsAllowedOnlyAfterThePreviousCancelFinishedAndWhileTheQueryIsOnTheWire() {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        let step21 = machine.cancelRequested(id, now: now)
        #expect(step21 == .send(id, .keyed))
        #expect(machine.resendBasis(id) == nil)
        let step22 = machine.cancelRequested(id, resend: true, now: now)
        #expect(step22 == .none)
        _ = machine.cancelFinished()
        #expect(machine.resendBasis(id) != nil)
        let step23 = machine.cancelRequested(id, resend: true, now: now + .seconds(1))
        #expect(step23 == .send(id, .keyed))
        _ = machine.cancelFinished()
        // The resend counts, and the first cancel's instant stays the basis of the resends' bound.
        #expect(machine.resendBasis(id) == .init(firstAt: now, resends: 1))
        _ = machine.resultsEnded(id)
        #expect(machine.resendBasis(id) == nil)
        let step24 = machine.cancelRequested(id, resend: true, now: now)
        #expect(step24 == .none)
    }

    /// While a pool's driver sends shared statements, a resend's basis names the driver's consent, to ask first.
    @Test func aResendAsksTheConsentHeldWhileADriverSends() {
        var machine = ConnectionStateMachine.keyed()
        let consent = ResendConsent { false }
        machine.resendConsentChanged(consent)
        let id = sentQuery(&machine)
        _ = machine.cancelRequested(id, now: now)
        _ = machine.cancelFinished()
        #expect(machine.resendBasis(id)?.consent === consent)
        machine.resendConsentChanged(nil)
        #expect(machine.resendBasis(id) == .init(firstAt: now, resends: 0))
    }

    @Test func cancelWhileAPreviousCancelIsPendingWaitsForBoth() {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        _ = machine.cancelRequested(id, now: now)
        _ = machine.cancelFinished()
        _ = machine.cancelRequested(id, resend: true, now: now)
        #expect(machine.cancelsInFlight == 1)
        machine.operationLeft(id)
        machine.end()
        let step25 = machine.begin()
        #expect(step25 == .cleanUpFirst)
        let step26 = machine.nextCleanupStep()
        #expect(step26.settlement != nil)
    }

    @Test func rollbackComesAfterTheDrainAndOnlyOnce() {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        machine.requireRollback()
        machine.operationLeft(id)
        machine.end()
        let step27 = machine.begin()
        #expect(step27 == .cleanUpFirst)
        let step28 = machine.nextCleanupStep()
        #expect(step28 == .drain(id))
        _ = machine.resultsEnded(id)
        let step29 = machine.nextCleanupStep()
        #expect(step29 == .rollback)
        let step30 = machine.nextCleanupStep()
        #expect(step30 == .done)
    }

    /// A pool's cleanup between leases is a holder of its own: it takes the connection only when something is owed,
    /// nothing else starts on it until it ends, and it runs the same steps an operation's cleanup would.
    @Test func aCleanupBetweenLeasesHoldsTheConnectionUntilItEnds() {
        var machine = ConnectionStateMachine.keyed()
        #expect(machine.beginCleanup() == .nothingOwed)
        #expect(machine.holder == .nobody, "a clean connection is not held by a cleanup that had nothing to do")
        let id = sentQuery(&machine)
        #expect(machine.beginCleanup() == .refuseBusy, "an operation holds it")
        #expect(machine.cancelRequested(id, now: now) == .send(id, .keyed))
        machine.operationLeft(id)
        machine.end()

        #expect(machine.beginCleanup() == .cleanUp)
        #expect(machine.holder == .cleanup)
        #expect(machine.begin() == .refuseBusy, "an operation while the cleanup runs")
        #expect(machine.beginCleanup() == .refuseBusy, "a second cleanup")
        #expect(machine.nextCleanupStep().settlement != nil)
        _ = machine.cancelFinished()
        #expect(machine.nextCleanupStep() == .drain(id))
        #expect(machine.resultsEnded(id).ended)
        #expect(machine.nextCleanupStep() == .done)
        machine.end()
        #expect(machine.holder == .nobody)
        #expect(machine.begin() == .ready)

        machine.end()
        machine.lost()
        #expect(machine.beginCleanup() == .refuseUnusable)
    }

    @Test func busyAndBrokenAreRefused() {
        var machine = ConnectionStateMachine.keyed()
        let step31 = machine.begin()
        #expect(step31 == .ready)
        let step32 = machine.begin()
        #expect(step32 == .refuseBusy)
        machine.lost()
        #expect(machine.isUnusable && !machine.isClosed, "lost is not closed")
        machine.end()
        let step33 = machine.begin()
        #expect(step33 == .refuseUnusable)
        let step34 = machine.cancelRequested(1, now: now)
        #expect(step34 == .none)
        let step35 = machine.nextCleanupStep()
        #expect(step35 == .unusable)
    }

    /// A caller that leaves because it was cancelled stops its query on the server once: the machine sends the
    /// stop when no cancel for the query went out yet (a cancel between two waits), and none when the
    /// cancellation's hook already sent one. A caller that leaves for another reason sends none.
    @Test func aCancelledCallerThatLeavesStopsItsQueryOnce() {
        var machine = ConnectionStateMachine.keyed()
        let quiet = sentQuery(&machine)
        #expect(machine.operationLeft(quiet) == .none, "an error, not a cancel: drained, not stopped")
        #expect(machine.wire == .abandoned(quiet))

        var between = ConnectionStateMachine.keyed()
        let first = sentQuery(&between)
        let left = between.operationLeft(first, stop: true, now: now)
        #expect(left == .send(first, .keyed), "no hook ran: the stop goes out")
        #expect(between.wire == .abandoned(first))
        #expect(between.cancelsInFlight == 1)

        var hooked = ConnectionStateMachine.keyed()
        let second = sentQuery(&hooked)
        #expect(hooked.cancelRequested(second, now: now) == .send(second, .keyed), "the cancellation's hook")
        #expect(hooked.operationLeft(second, stop: true, now: now) == .none, "the hook's cancel is the one stop")
        #expect(hooked.cancelsInFlight == 1)
    }

    /// Cancels in flight share one settlement, made by the first and handed to the finish of the last; a resend
    /// after they settled is a new flight with a settlement of its own. What a cleanup waits on is always the one
    /// the last cancel's finish sets: no cancel is counted without it.
    @Test func eachFlightOfCancelsHasOneSettlement() throws {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        #expect(machine.nextCleanupStep().settlement == nil, "no cancel, nothing to wait on")
        #expect(machine.cancelRequested(id, now: now) == .send(id, .keyed))
        let first = try #require(machine.nextCleanupStep().settlement)
        #expect(machine.cancelRequested(id, another: true, now: now) == .send(id, .keyed))
        #expect(machine.nextCleanupStep().settlement == first, "a second cancel joins the flight")
        #expect(machine.cancelFinished() == .none, "one is still in flight")
        #expect(machine.cancelFinished() == .cancelsSettled(first))
        #expect(machine.nextCleanupStep().settlement == nil)
        #expect(machine.cancelFinished() == .none, "a finish with none in flight")
        #expect(machine.cancelRequested(id, resend: true, now: now) == .send(id, .keyed))
        let second = try #require(machine.nextCleanupStep().settlement)
        #expect(second != first, "a resend is a new flight")
        #expect(machine.cancelFinished() == .cancelsSettled(second))
    }

    @Test func closeCancelsAQueryOnTheWireOnceAndIsIdempotent() {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        #expect(!machine.isClosed)
        let step36 = machine.close(now: now)
        guard case .cancelThenFinish(id, .keyed, let settlement) = step36 else {
            Issue.record("close with a query on the wire: \(step36)")
            return
        }
        #expect(machine.isClosed)
        let step37 = machine.close(now: now)
        #expect(step37 == .alreadyClosed)
        let step38 = machine.cancelRequested(id, now: now)
        #expect(step38 == .none)
        let step39 = machine.cancelFinished()
        #expect(step39 == .cancelsSettled(settlement), "the close's cancel settles what the close waits on")
        let step40 = machine.begin()
        #expect(step40 == .refuseUnusable)
    }

    @Test func closeWithACancelAlreadyInFlightSettlesFirst() throws {
        var machine = ConnectionStateMachine.keyed()
        let id = sentQuery(&machine)
        _ = machine.cancelRequested(id, now: now)
        let waited = try #require(machine.nextCleanupStep().settlement)
        let step41 = machine.close(now: now)
        #expect(step41 == .settleThenFinish(waited), "the close waits on the flight's one settlement")
        var idle = ConnectionStateMachine.keyed()
        let step42 = idle.close(now: now)
        #expect(step42 == .finish)
    }

    @Test func theModeLivesWithTheQueryAndABrokenConnectionOwesNoRollback() {
        var machine = ConnectionStateMachine.keyed()
        #expect(machine.begin() == .ready)
        let id = machine.sent(mode: .copyIn)
        machine.operationLeft(id)
        #expect(machine.usability == .usable(.init(onWire: .abandoned(id, .copyIn))))
        machine.requireRollback()
        #expect(machine.needsRollback)
        machine.lost()
        // Nothing of the wire or of the transaction survives a loss: no mode, no rollback owed.
        #expect(machine.usability == .broken)
        #expect(machine.mode == .simple)
        #expect(!machine.needsRollback)
        machine.requireRollback()
        #expect(!machine.needsRollback)
    }

    @Test func aCarriedDeadlineTranslatesOnlyItsOwnQuerysError() {
        var machine = ConnectionStateMachine.keyed()
        #expect(machine.begin() == .ready)
        let carried = ConnectionStateMachine.CarriedDeadline(deadline: now, inForce: true)
        let id = machine.sent(mode: .carried(carried))
        #expect(machine.mode.isPipeline)
        machine.carriedPipelineEnded()
        #expect(machine.mode == .simple)
        #expect(machine.lastCarried == carried)
        #expect(machine.resultsEnded(id) == (ended: true, ourCancel: false))
        machine.end()
        // The next query carries nothing: a 57014 in its results is not the old deadline's.
        #expect(machine.begin() == .ready)
        _ = machine.sent()
        #expect(machine.lastCarried == nil)
    }
}

extension ConnectionStateMachine.CleanupStep {
    /// What a `waitForCancels` step waits on; `nil` for any other step.
    var settlement: ConnectionStateMachine.CancelSettlement? {
        if case .waitForCancels(let settlement) = self { return settlement }
        return nil
    }
}
