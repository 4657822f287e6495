// A reference for README "Measured", not part of the package: the cheapest event loop over libpq that this machine
// runs, to put the 64-task row beside what any asynchronous client could reach here. THREADS threads each drive
// CONNECTIONS/THREADS connections with poll(2); each connection keeps up to DEPTH `SELECT $1::int` in flight (DEPTH 1:
// one query at a time, as a pool hands out connections; above 1: libpq's pipeline mode, each query its own Sync).
// DEPTH 0 is the blocking reference instead: one thread per connection, a `PQexecParams` loop each (THREADS unused).
// No cancellation, no scopes, no tasks: a ceiling, not a competitor.
//
//   cc -O2 -o /tmp/rk-event-loop Scripts/reference/libpq-event-loop.c $(pkg-config --cflags --libs libpq) -lpthread
//   /tmp/rk-event-loop "host=/path/to/socket-dir port=5432 user=postgres dbname=postgres" 16 1 64000 2
//   /tmp/rk-event-loop "host=/path/to/socket-dir port=5432 user=postgres dbname=postgres" 16 0 64000 16
//   rm /tmp/rk-event-loop
//
// Prints the queries per second and the process's CPU (user + system, getrusage) per query.
#include <libpq-fe.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

enum { MAX_CONNECTIONS = 256, MAX_THREADS = 64 };

static const char *conninfo;
static int connections_per_thread, depth;
static long queries_per_thread;

static void fail(const char *what, PGconn *connection) {
    fprintf(stderr, "%s: %s\n", what, connection ? PQerrorMessage(connection) : "");
    exit(1);
}

static void send_query(PGconn *connection, long value) {
    char text[32];
    snprintf(text, sizeof text, "%ld", value);
    const char *values[1] = {text};
    if (!PQsendQueryParams(connection, "SELECT $1::int", 1, NULL, values, NULL, NULL, 0)) fail("send", connection);
    if (depth > 1 && !PQpipelineSync(connection)) fail("sync", connection);
}

static void *drive(void *unused) {
    (void)unused;
    PGconn *connection[MAX_CONNECTIONS];
    int in_flight[MAX_CONNECTIONS];
    struct pollfd entry[MAX_CONNECTIONS];
    long sent = 0, done = 0;
    for (int k = 0; k < connections_per_thread; k++) {
        connection[k] = PQconnectdb(conninfo);
        if (PQstatus(connection[k]) != CONNECTION_OK) fail("connect", connection[k]);
        PQsetnonblocking(connection[k], 1);
        if (depth > 1 && !PQenterPipelineMode(connection[k])) fail("pipeline mode", connection[k]);
        in_flight[k] = 0;
        for (int d = 0; d < depth && sent < queries_per_thread; d++, in_flight[k]++) send_query(connection[k], sent++);
        PQflush(connection[k]);
    }
    while (done < queries_per_thread) {
        for (int k = 0; k < connections_per_thread; k++) {
            entry[k] = (struct pollfd){.fd = PQsocket(connection[k]), .events = POLLIN};
        }
        if (poll(entry, connections_per_thread, -1) < 0) fail("poll", NULL);
        for (int k = 0; k < connections_per_thread; k++) {
            if (!(entry[k].revents & POLLIN)) continue;
            if (!PQconsumeInput(connection[k])) fail("read", connection[k]);
            while (in_flight[k] > 0 && !PQisBusy(connection[k])) {
                PGresult *result = PQgetResult(connection[k]);
                if (result == NULL) {
                    if (depth > 1) continue;  // between two pipelined queries
                    done++, in_flight[k]--;   // one query's results ended
                    if (sent < queries_per_thread) send_query(connection[k], sent++), in_flight[k]++;
                    continue;
                }
                ExecStatusType status = PQresultStatus(result);
                PQclear(result);
                if (status == PGRES_PIPELINE_SYNC) {
                    done++, in_flight[k]--;
                    if (sent < queries_per_thread) send_query(connection[k], sent++), in_flight[k]++;
                } else if (status != PGRES_TUPLES_OK) {
                    fail("query", connection[k]);
                }
            }
            PQflush(connection[k]);
        }
    }
    for (int k = 0; k < connections_per_thread; k++) PQfinish(connection[k]);
    return NULL;
}

// DEPTH 0: one connection, queried with blocking `PQexecParams` calls.
static void *block(void *unused) {
    (void)unused;
    PGconn *connection = PQconnectdb(conninfo);
    if (PQstatus(connection) != CONNECTION_OK) fail("connect", connection);
    for (long i = 0; i < queries_per_thread; i++) {
        char text[32];
        snprintf(text, sizeof text, "%ld", i);
        const char *values[1] = {text};
        PGresult *result = PQexecParams(connection, "SELECT $1::int", 1, NULL, values, NULL, NULL, 0);
        if (PQresultStatus(result) != PGRES_TUPLES_OK) fail("query", connection);
        PQclear(result);
    }
    PQfinish(connection);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s CONNINFO CONNECTIONS DEPTH QUERIES THREADS\n", argv[0]);
        return 2;
    }
    conninfo = argv[1];
    int connections = atoi(argv[2]), threads = atoi(argv[5]);
    depth = atoi(argv[3]);
    long queries = atol(argv[4]);
    if (depth == 0) threads = connections;  // the blocking reference: a thread per connection
    if (threads < 1 || threads > MAX_THREADS || connections < threads || connections / threads > MAX_CONNECTIONS ||
        depth < 0 || queries < threads) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    connections_per_thread = connections / threads;
    queries_per_thread = queries / threads;
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pthread_t thread[MAX_THREADS];
    for (int i = 0; i < threads; i++) pthread_create(&thread[i], NULL, depth == 0 ? block : drive, NULL);
    for (int i = 0; i < threads; i++) pthread_join(thread[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &end);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double seconds = (end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
                 usage.ru_stime.tv_usec / 1e6;
    long total = queries_per_thread * threads;
    printf("%ld queries, %d connections, depth %d, %d threads: %.0f q/s, %.1f us of CPU per query\n", total,
           connections_per_thread * threads, depth, threads, total / seconds, cpu / total * 1e6);
    return 0;
}
