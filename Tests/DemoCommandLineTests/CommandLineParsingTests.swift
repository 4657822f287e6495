import DemoCommandLine
import Foundation
import Testing

/// The CLI's parsing, in-process: every rule a bad command line can break, and the JSON it prints.
@Suite struct CommandLineParsingTests {
    enum First: DemoCommand {
        static let name = "first"
        static let usage = "resource-demo [first] [--json]"
        static let details = "  the default command"
        static let valueFlags: Set<String> = ["--postgres"]
        static let switchFlags: Set<String> = ["--json"]
        static func run(_ arguments: Arguments) async throws -> Int32 { 0 }
    }

    enum Second: DemoCommand {
        static let name = "second"
        static let usage = "resource-demo second --size N [--after DURATION] [--listen HOST:PORT]"
        static let details = "  another one"
        static let valueFlags: Set<String> = ["--size", "--after", "--listen"]
        static let switchFlags: Set<String> = []
        static func run(_ arguments: Arguments) async throws -> Int32 { 0 }
    }

    static let commands: [any DemoCommand.Type] = [First.self, Second.self]

    func parse(_ words: [String]) -> CommandLineRequest {
        CommandLineRequest.parse(words, commands: Self.commands, overview: "OVERVIEW", version: "v1")
    }

    func error(_ words: [String]) -> String? {
        if case .usageError(let error) = parse(words) { return error.description }
        return nil
    }

    @Test func helpVersionAndTheDefaultCommand() {
        #expect(parse(["--help"]) == .show("OVERVIEW"))
        #expect(parse(["-h"]) == .show("OVERVIEW"))
        #expect(parse(["--version"]) == .show("v1"))
        #expect(
            parse([]) == .run(command: "first", try! Arguments(command: "first", [], valueFlags: [], switchFlags: [])))
        guard case .run("first", let arguments) = parse(["--json"]) else {
            Issue.record("flags alone run the default command")
            return
        }
        #expect(arguments.has("--json"))
        #expect(parse(["second", "--help"]) == .show(Second.usage + "\n" + Second.details))
    }

    @Test func usageErrorsNameTheProblem() {
        #expect(error(["nonsense"]) == "unknown command 'nonsense'")
        #expect(error(["second", "--bogus"]) == "unknown flag '--bogus' for second")
        #expect(error(["second", "stray"]) == "unexpected argument 'stray' for second")
        #expect(error(["second", "--size"]) == "--size needs a value")
        #expect(error(["second", "--size", "1", "--size=2"]) == "--size given twice")
        #expect(error(["first", "--json=yes"]) == "--json takes no value")
    }

    @Test func valuesAreReadAndChecked() throws {
        guard
            case .run(_, let arguments) = parse(["second", "--size=12", "--after", "250ms", "--listen", "[::1]:5432"])
        else {
            Issue.record("expected a run")
            return
        }
        #expect(try arguments.integer("--size", in: 1...100) == 12)
        #expect(throws: UsageError("--size: '12' is not a whole number in 1...10")) {
            try arguments.integer("--size", in: 1...10)
        }
        #expect(try arguments.duration("--after") == .milliseconds(250))
        #expect(try arguments.hostPort("--listen")! == ("::1", 5432))
        #expect(throws: UsageError("second needs --missing")) { try arguments.required("--missing") }
    }

    @Test func durations() {
        #expect(Arguments.parseDuration("500us") == .microseconds(500))
        #expect(Arguments.parseDuration("500µs") == .microseconds(500))
        #expect(Arguments.parseDuration("1.5s") == .milliseconds(1500))
        #expect(Arguments.parseDuration("2m") == .seconds(120))
        for bad in ["", "s", "-1s", "1", "1h", "nans", "infs", "1e3s", "999999999s"] {
            #expect(Arguments.parseDuration(bad) == nil, "\(bad)")
        }
    }

    @Test func hostsAndPorts() {
        #expect(Arguments.parseHostPort("127.0.0.1:7070")! == ("127.0.0.1", 7070))
        #expect(Arguments.parseHostPort("localhost:0")! == ("localhost", 0))
        #expect(Arguments.parseHostPort("[::1]:5432")! == ("::1", 5432))
        for bad in ["7070", ":80", "host:", "host:65536", "::1:80", "[::1]5432", "host:-1"] {
            #expect(Arguments.parseHostPort(bad) == nil, "\(bad)")
        }
    }

    @Test func jsonLinesAreValidJSONWhateverTheText() throws {
        var line = JSONLine(["outcome": .string("cancelled \"quoted\" \\ \n\t\u{01}é/")])
        line.set("count", .int(-3))
        line.set("ratio", .double(.infinity))
        line.set("ok", .bool(true))
        line.set("missing", .null)
        let text = line.text
        #expect(!text.contains("\n"), "one line")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        #expect(object["outcome"] as? String == "cancelled \"quoted\" \\ \n\t\u{01}é/")
        #expect(object["count"] as? Int == -3)
        #expect(object["ratio"] is NSNull, "a non-finite number is null, not invalid JSON")
        #expect(object["ok"] as? Bool == true)
        #expect(object["missing"] is NSNull)
    }
}
