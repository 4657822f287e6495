import CSystemShims
import Glibc
import ResourceKit

/// `resource-demo`: a tour of ResourceKit. (The per-resource commands arrive with the adapters.)
@main
struct ResourceDemo {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.contains("--help") || arguments.contains("-h") {
            print("""
            usage: resource-demo [tour]
                   resource-demo bench [--quick] [--json] [--postgres CONNINFO]
            """)
            return
        }
        do {
            switch arguments.first {
            case nil, "tour":
                if let unknown = arguments.dropFirst().first { usage("unknown argument '\(unknown)'") }
                try await CoreTour.run()
            case "bench":
                var quick = false, json = false
                var postgres: String?
                var rest = arguments.dropFirst()
                while let flag = rest.popFirst() {
                    switch flag {
                    case "--quick": quick = true
                    case "--json": json = true
                    case "--postgres":
                        guard let value = rest.popFirst() else { usage("--postgres needs a conninfo or URL") }
                        postgres = value
                    default: usage("unknown flag '\(flag)' for bench")
                    }
                }
                try await Bench.run(quick: quick, json: json, postgres: postgres)
            case let other?:
                usage("unknown command '\(other)'")
            }
        } catch {
            FileHandleOutput.error("resource-demo: \(error)")
            exit(1)
        }
    }
}

/// Prints a usage error (naming the bad argument) and exits with status 2.
func usage(_ message: String) -> Never {
    FileHandleOutput.error("resource-demo: \(message) (try --help)")
    exit(2)
}

enum FileHandleOutput {
    static func error(_ line: String) {
        var text = line + "\n"
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}
