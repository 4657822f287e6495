// README, "Adapters". Glue: the function around the statements.
// snippet: readme-adapters
import FileAdapter
import PostgresAdapter
import ResourceKit  // withResourceScope: the adapters do not re-export the core
import SocketAdapter

func adapters() async throws {  // glue
    try await withResourceScope("request") { scope in
        let socket = try await SocketConnection.connect(host: "127.0.0.1", port: 7070, in: scope)
        try await socket.write("PING\n")
        let reply = try await socket.readLine()            // nil at the peer's end of stream

        let fifo = try await StreamReader.open(path: "/tmp/events.fifo", in: scope)
        for try await line in fifo.lines() { print(line) }  // a silent writer never blocks cancellation

        let file = try await FileReader.open(path: "/var/log/app.log", follow: true, in: scope)
        for try await chunk in file.chunks() { _ = chunk }  // tail -f, cancellable while waiting for growth

        let db = try await PostgresConnection.connect("postgres://app@127.0.0.1/app", in: scope)
        let rows = try await db.query("SELECT id, name FROM users WHERE id = $1", [42])
        let name: String = try rows[0].decode(named: "name")
        _ = (reply, name)  // glue
    }
}  // glue
// end snippet
