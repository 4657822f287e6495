// rk-spawn-probe: a parent process for the crash-only tests. It starts one child through ResourceKit's spawn,
// prints the child's pid, then waits to be killed.
//
//     rk-spawn-probe dies-with-parent|survives-parent PROGRAM [ARGUMENT...]

import Glibc
import ResourceKit
import ResourceKitIO
import ResourceKitProcesses

/// Writes `text` to descriptor `fd` (unbuffered: the test reads the line while this process still runs).
func say(_ text: String, to fd: Int32) {
    var bytes = Array((text + "\n").utf8)
    _ = write(fd, &bytes, bytes.count)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2, ["dies-with-parent", "survives-parent"].contains(arguments[0]) else {
    say("usage: rk-spawn-probe dies-with-parent|survives-parent PROGRAM [ARGUMENT...]", to: 2)
    exit(64)
}
do {
    let child = try Syscall.spawn(
        Array(arguments.dropFirst()), standardOutput: .nullDevice, standardError: .nullDevice,
        diesWithParent: arguments[0] == "dies-with-parent")
    say("child \(child)", to: 1)
} catch {
    say("rk-spawn-probe: \(error)", to: 2)
    exit(1)
}
while true { pause() }
