#!/usr/bin/env bash
# Builds each library's symbol graph and converts it with docc; prints warnings; exit 1 if any.
set -uo pipefail
cd "$(dirname "$0")/.."
total=0
for module in ResourceKit ResourceKitIO ResourceKitPatterns ResourceKitObservation ResourceKitPrometheus \
    ResourceKitProcesses SocketAdapter FileAdapter PostgresAdapter EmbeddedPostgres ResourceKitTesting PostgresActivity \
    DemoCommandLine; do
    graphs=$(mktemp -d)
    catalog=$(mktemp -d)/$module.docc
    mkdir -p "$catalog"
    swift build --target "$module" -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs" >/dev/null 2>&1 || { echo "$module: build failed"; exit 1; }
    # Only this module's own graphs (the build also writes its dependencies').
    find "$graphs" -name '*.symbols.json' ! -name "$module.symbols.json" ! -name "$module@*.symbols.json" -delete
    out=$(docc convert "$catalog" --additional-symbol-graph-dir "$graphs" --fallback-display-name "$module" \
        --fallback-bundle-identifier "org.resourcekit.$module" --output-path "$(mktemp -d)" 2>&1)
    warnings=$(echo "$out" | grep -E "(warning|error):" || true)
    count=$(echo -n "$warnings" | grep -c . || true)
    echo "$module: $count docc warning(s)"
    [ -n "$warnings" ] && echo "$warnings" | sed 's/^/  /'
    total=$((total + count))
done
[ "$total" -eq 0 ]
