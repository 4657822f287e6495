import DemoRuntime
import Foundation
import Glibc
import ResourceKit

/// `resource-demo bench`: a thin entry. The benchmark lives in its own executable, `resource-bench`, which the
/// CLI a user installs does not link; this looks for it beside `resource-demo` and replaces this process with
/// it, so signals and the exit status are the benchmark's own.
enum BenchEntry {
    static func replaceProcess(with arguments: [String]) -> Never {
        let directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        let bench = directory.appendingPathComponent("resource-bench").path
        guard access(bench, X_OK) == 0 else {
            Console.error(
                "resource-demo: resource-bench is not built beside this executable; "
                    + "run: swift build -c release --product resource-bench")
            exit(1)
        }
        let argv = ([bench] + arguments).map { strdup($0) } + [nil]
        execv(bench, argv)
        Console.error("resource-demo: could not start resource-bench (\(SystemError.current("execv")))")
        exit(1)
    }
}
