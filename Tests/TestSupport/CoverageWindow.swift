import Foundation
import TestProcessSetup

/// The code a walk runs, seen by coverage: `Scripts/walks` builds the tests with `--enable-code-coverage`, runs one
/// walk test with `RESOURCEKIT_WALK_DIR` set, and lists the source files and functions whose counters moved inside
/// the window. In every other run the window is nothing: the body just runs.
///
/// The counters are the process's: the window holds the one walk test that `Scripts/walks` runs alone, and counts
/// what any thread ran meanwhile (the reactor's and the timers' threads are part of a walk).
public func coverageWindow<T>(_ name: String, _ body: () async throws -> T) async rethrows -> T {
    guard let directory = ProcessInfo.processInfo.environment["RESOURCEKIT_WALK_DIR"],
        rk_coverage_window_open() == 1
    else {
        return try await body()
    }
    let value = try await body()
    _ = rk_coverage_window_close("\(directory)/\(name).profraw")
    return value
}
