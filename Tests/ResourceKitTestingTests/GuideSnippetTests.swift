import Foundation
import Testing

/// Every Swift block of `README.md`, `Docs/WritingAnAdapter.md` and the guides (`Docs/Guides/*.md`) is compiled: it
/// is marked `<!-- snippet: name -->`, and its lines are those between `// snippet: name` and `// end snippet` in a
/// source file that is built (this package's tests, the examples, or `Docs/Blocks`, a package `.ci/run` builds), less the
/// lines ending in `// glue` (the reader's obvious glue: a function around statements, a namespace around a
/// declaration). Lines compare without their leading indentation, so a block can sit inside its glue.
@Suite struct GuideSnippetTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let documents =
        ["README.md", "Docs/WritingAnAdapter.md"]
        + ((try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Docs/Guides").path)) ?? [])
        .filter { $0.hasSuffix(".md") }.sorted().map { "Docs/Guides/" + $0 }
    static let sourceFolders = [
        "Tests", "Docs/Blocks", "Examples/ProcessAdapter/Sources", "Examples/ProcessAdapter/Tests",
        "Examples/SQLiteAdapter/Sources", "Examples/SQLiteAdapter/Tests", "Examples/CurlAdapter/Sources",
        "Examples/CurlAdapter/Tests", "Examples/RedisAdapter/Sources", "Examples/RedisAdapter/Tests",
    ]

    struct Block {
        let document: String
        let line: Int
        let name: String?
        let lines: [String]
    }

    /// Every ```swift block of `document` (a fence may be indented, in a list item), with its marker's name.
    static func blocks(in document: String) throws -> [Block] {
        let text = try String(contentsOf: root.appendingPathComponent(document), encoding: .utf8)
        let lines = text.components(separatedBy: "\n")
        var blocks: [Block] = []
        var index = 0
        while index < lines.count {
            let fence = lines[index]
            guard fence.trimmingCharacters(in: .whitespaces) == "```swift" else {
                index += 1
                continue
            }
            let indent = fence.prefix { $0 == " " }.count
            let marker = lines[..<index].last { !$0.trimmingCharacters(in: .whitespaces).isEmpty }?
                .trimmingCharacters(in: .whitespaces)
            let name = marker.flatMap { marker -> String? in
                guard marker.hasPrefix("<!-- snippet: "), marker.hasSuffix(" -->") else { return nil }
                return String(marker.dropFirst("<!-- snippet: ".count).dropLast(" -->".count))
            }
            var body: [String] = []
            index += 1
            while index < lines.count, lines[index].trimmingCharacters(in: .whitespaces) != "```" {
                body.append(String(lines[index].dropFirst(min(indent, lines[index].prefix { $0 == " " }.count))))
                index += 1
            }
            blocks.append(Block(document: document, line: index - body.count, name: name, lines: body))
            index += 1
        }
        return blocks
    }

    /// The marked region named `name` in the Swift sources, without its glue lines.
    static func sourceSnippet(_ name: String) throws -> [String]? {
        try sourceSnippets.get()[name]
    }

    /// Every marked region of the Swift sources by name, read once: each file is read once and split only when it
    /// holds a marker (a scan per snippet read every file twenty times, seconds of one cooperative thread's time
    /// under the thread sanitizer, while every other suite of the process waited for a thread).
    static let sourceSnippets = Result { () throws -> [String: [String]] in
        var regions: [String: [String]] = [:]
        for folder in sourceFolders {
            let enumerator = FileManager.default.enumerator(atPath: root.appendingPathComponent(folder).path)
            while let path = enumerator?.nextObject() as? String {
                if (path as NSString).lastPathComponent == ".build" { enumerator?.skipDescendants() }
                guard path.hasSuffix(".swift") else { continue }
                let text = try String(
                    contentsOf: root.appendingPathComponent(folder).appendingPathComponent(path), encoding: .utf8)
                guard text.contains("// snippet: ") else { continue }
                let lines = text.components(separatedBy: "\n")
                for (start, line) in lines.enumerated() {
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    guard trimmed.hasPrefix("// snippet: ") else { continue }
                    let name = String(trimmed.dropFirst("// snippet: ".count).prefix { $0 != " " })
                    guard regions[name] == nil,
                        let end = lines[start...].firstIndex(where: {
                            $0.trimmingCharacters(in: .whitespaces) == "// end snippet"
                        })
                    else { continue }
                    regions[name] = lines[(start + 1)..<end].filter { !$0.hasSuffix("// glue") }
                }
            }
        }
        return regions
    }

    /// A line as compared: without its indentation and trailing blanks.
    static func normalized(_ line: String) -> String {
        String(line.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }

    @Test func everySwiftBlockIsMarked() throws {
        for document in Self.documents {
            for block in try Self.blocks(in: document) where block.name == nil {
                Issue.record(
                    """
                    \(document):\(block.line): a Swift block without a `<!-- snippet: name -->` marker: compile it \
                    (a region of that name in Docs/Blocks, the tests or an example) and mark it
                    """)
            }
        }
    }

    @Test func everyMarkedBlockIsTheCompiledSource() throws {
        var names: [String] = []
        for document in Self.documents {
            for block in try Self.blocks(in: document) {
                guard let name = block.name else { continue }
                names.append(name)
                let source = try #require(try Self.sourceSnippet(name), "no source region marked '\(name)'")
                let text = block.lines.map(Self.normalized)
                let compiled = source.map(Self.normalized)
                let first =
                    zip(text, compiled).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                    ?? min(text.count, compiled.count)
                #expect(
                    text == compiled,
                    """
                    \(document):\(block.line + first): '\(name)' differs from its source: block \
                    \(text.count > first ? text[first] : "(end)"), source \
                    \(compiled.count > first ? compiled[first] : "(end)")
                    """
                )
            }
        }
        #expect(names.count == Set(names).count, "a snippet name is used twice: \(names)")
        #expect(names.count >= 21, "README and the guides hold 21 Swift blocks; found \(names.count)")
    }
}
