import PostgresAdapter

extension BulkBench {
    /// The carried session reset's price: `tasks` tasks leasing from a pool that resets each session between users,
    /// beside the same tasks over a pool that resets none, in throughput and in CPU per query.
    struct ResetPrice {
        var resettingQPS: Samples
        var resetlessQPS: Samples
        var resettingCPU: Samples
        var resetlessCPU: Samples
        /// Each pair's resetting figure over its resetless one.
        var qpsRatios: [Double] = []
        var cpuRatios: [Double] = []

        init(tasks: Int) {
            let pool = "\(tasks) tasks over a pool of 16"
            let resetless = "\(pool) with no session reset"
            resettingQPS = Samples("\(pool): SELECT $1::int", unit: "qps")
            resetlessQPS = Samples("\(resetless): SELECT $1::int", unit: "qps")
            resettingCPU = Samples("CPU per query, \(pool)", unit: "us")
            resetlessCPU = Samples("CPU per query, \(resetless)", unit: "us")
        }
    }

    /// `pairs` pairs of loads of `queries` queries each: the resetting pool's and the resetless pool's back to back,
    /// each pair starting with the other one than the last pair did (``rotatingRounds(_:sides:_:)``), so that each
    /// ratio compares two loads measured within a second of each other and neither pool always runs first. A neighbour
    /// that slows the machine for a while slows both sides of the pairs it overlaps, and the median over pairs drops
    /// the pairs it split (Benchmarks/README.md, "The gate").
    static func resetPrice(
        tasks: Int, queries: Int, pairs: Int, pool: PostgresPool, resetless: PostgresPool
    ) async throws -> ResetPrice {
        var price = ResetPrice(tasks: tasks)
        let measured = try await rotatingRounds(pairs, sides: 2) { side in
            try await measure(queries: queries) {
                try await poolLoad(side == 0 ? pool : resetless, tasks: tasks, queries: queries)
            }
        }
        for pair in measured {
            let (resetting, plain) = (pair[0], pair[1])
            price.resettingQPS.values.append(resetting.qps)
            price.resetlessQPS.values.append(plain.qps)
            price.resettingCPU.values.append(resetting.cpu)
            price.resetlessCPU.values.append(plain.cpu)
            if plain.qps > 0 { price.qpsRatios.append(resetting.qps / plain.qps) }
            if plain.cpu > 0 { price.cpuRatios.append(resetting.cpu / plain.cpu) }
        }
        return price
    }
}
