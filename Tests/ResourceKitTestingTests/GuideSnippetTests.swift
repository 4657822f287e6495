import Foundation
import Testing

/// Every code block of `Docs/WritingAnAdapter.md` marked `<!-- snippet: name -->` is the text between
/// `// snippet: name` and `// end snippet` in a source file that is compiled and tested (the composition
/// example in this target, the process example in its own package, built by CI): the guide cannot drift.
@Suite struct GuideSnippetTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The guide's marked blocks, by name.
    static func guideSnippets() throws -> [String: [String]] {
        let guide = try String(contentsOf: root.appendingPathComponent("Docs/WritingAnAdapter.md"), encoding: .utf8)
        var snippets: [String: [String]] = [:]
        var lines = guide.components(separatedBy: "\n")[...]
        while let line = lines.popFirst() {
            guard line.hasPrefix("<!-- snippet: "), lines.popFirst() == "```swift" else { continue }
            let name = String(line.dropFirst("<!-- snippet: ".count).dropLast(" -->".count))
            var body: [String] = []
            while let next = lines.popFirst(), next != "```" { body.append(next) }
            snippets[name] = body
        }
        return snippets
    }

    /// The marked region named `name` in the Swift sources under Tests and Examples, dedented.
    static func sourceSnippet(_ name: String) throws -> [String]? {
        let marker = "// snippet: \(name)"
        for folder in [
            "Tests", "Examples/ProcessAdapter/Sources", "Examples/ProcessAdapter/Tests", "Examples/SQLiteAdapter/Tests",
        ] {
            let enumerator = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path)
            while let path = enumerator?.nextObject() as? String {
                guard path.hasSuffix(".swift") else { continue }
                let text = try String(
                    contentsOf: root.appendingPathComponent(folder).appendingPathComponent(path), encoding: .utf8)
                let lines = text.components(separatedBy: "\n")
                guard let start = lines.firstIndex(where: { $0.trimmingCharacters(in: .whitespaces).hasPrefix(marker) })
                else { continue }
                let end = try #require(
                    lines[start...].firstIndex { $0.trimmingCharacters(in: .whitespaces) == "// end snippet" })
                return dedent(Array(lines[(start + 1)..<end]))
            }
        }
        return nil
    }

    static func dedent(_ lines: [String]) -> [String] {
        let indent = lines.filter { !$0.isEmpty }.map { $0.prefix { $0 == " " }.count }.min() ?? 0
        return lines.map { String($0.dropFirst(min(indent, $0.count))) }
    }

    @Test func everyMarkedSnippetIsTheCompiledSource() throws {
        let snippets = try Self.guideSnippets()
        #expect(Set(snippets.keys) == ["process-cancel", "process-kit", "command-client", "sqlite-kit"])
        for (name, text) in snippets {
            let source = try #require(try Self.sourceSnippet(name), "no source region marked '\(name)'")
            let first =
                zip(text, source).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                ?? min(text.count, source.count)
            #expect(
                text == source,
                """
                the guide's '\(name)' differs from its source at line \(first + 1): guide \
                \(text.count > first ? text[first] : "(end)"), source \
                \(source.count > first ? source[first] : "(end)")
                """
            )
        }
    }
}
