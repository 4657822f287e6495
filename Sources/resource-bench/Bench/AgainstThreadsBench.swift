extension BulkBench {
    /// The gated rows against the threads, measured in `rounds` rounds: each round runs every figure's load and the
    /// threads' load (`queries` queries each) back to back, starting with a different side each round
    /// (``rotatingRounds(_:sides:_:)``). Each figure comes back with its samples and the threads' from these rounds
    /// only, and with each round's ratio, so that a neighbour that slows the machine for a while moves both sides of
    /// the rounds it overlaps (Benchmarks/README.md, "The gate"). The sweep's batches run each side once per batch,
    /// two batches in the quick form: too few, and too far apart, for a ratio that the gate can read.
    static func againstThreads(
        _ figures: [Concurrency], rounds: Int, queries: Int,
        load: (Concurrency) async throws -> Void, threads: () async -> Void
    ) async throws -> [Concurrency] {
        guard !figures.isEmpty, rounds > 0 else { return figures }
        let measured = try await rotatingRounds(rounds, sides: figures.count + 1) { side in
            try await measure(queries: queries) {
                if side == figures.count { await threads() } else { try await load(figures[side]) }
            }
        }
        return figures.indices.map { index in
            var figure = Concurrency(tasks: figures[index].tasks, placement: figures[index].placement)
            var (qpsRatios, cpuRatios) = ([Double](), [Double]())
            for round in measured {
                let (ours, raw) = (round[index], round[figures.count])
                figure.oursQPS.values.append(ours.qps)
                figure.oursCPU.values.append(ours.cpu)
                figure.rawQPS.values.append(raw.qps)
                figure.rawCPU.values.append(raw.cpu)
                if raw.qps > 0 { qpsRatios.append(ours.qps / raw.qps) }
                if raw.cpu > 0 { cpuRatios.append(ours.cpu / raw.cpu) }
            }
            figure.qpsRatios = qpsRatios
            figure.cpuRatios = cpuRatios
            return figure
        }
    }
}
