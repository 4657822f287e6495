import CSystemShims
import Glibc
import ResourceKit

/// `resource-demo`: a tour of ResourceKit. (The per-resource commands arrive with the adapters.)
@main
struct ResourceDemo {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.contains("--help") || arguments.contains("-h") {
            print("usage: resource-demo [tour]")
            return
        }
        if let unknown = arguments.first(where: { $0 != "tour" }) {
            FileHandleOutput.error("resource-demo: unknown argument '\(unknown)' (try --help)")
            exit(2)
        }
        do {
            try await CoreTour.run()
        } catch {
            FileHandleOutput.error("resource-demo: \(error)")
            exit(1)
        }
    }
}

enum FileHandleOutput {
    static func error(_ line: String) {
        var text = line + "\n"
        text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}
