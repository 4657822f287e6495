import ProcessAdapter
import Testing

// README, "Writing an adapter": the kit run on the process example, compiled here where `ChildProcess` is
// (`Tests/ResourceKitTestingTests/GuideSnippetTests.swift` checks that README shows these lines). The kit itself
// runs on `ChildProcess` in `ChildProcessTests`; this function is compiled, not run. Glue: the function.
// snippet: readme-kit
import ResourceKitTesting

func readmeKit() async {  // glue
    let report = await AdapterConformance<ChildProcess>(
        "ChildProcess",
        make: { scope in try await ChildProcess.spawn(["/bin/cat"], in: scope) },
        blockingOperation: { process in _ = try await process.read(upTo: 1) },
        completeOperation: { process in try process.send("x") },
        exchange: { process, token in
            try process.send(token + "\n")
            return try await process.readLine() ?? ""
        }
    ).run()
    #expect(report.passed, "\(report)")
}  // glue
// end snippet
