#!/usr/bin/env bash
# Builds each library's symbol graph and converts it with docc; prints warnings; exit 1 if any.
set -uo pipefail
cd "$(dirname "$0")/.."
# SwiftPM and docc leave TemporaryDirectory.* folders in $TMPDIR: keep them inside .build, as .ci/run does.
export TMPDIR="${TMPDIR:-$PWD/.build/tmp}"
[ "$TMPDIR" = /tmp ] && export TMPDIR="$PWD/.build/tmp"
mkdir -p "$TMPDIR"
total=0
# One scratch folder for every module's graphs, catalog and output, removed however the script ends.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for module in ResourceKit ResourceKitIO ResourceKitPatterns ResourceKitObservation ResourceKitPrometheus \
    ResourceKitProcesses SocketAdapter FileAdapter PostgresAdapter EmbeddedPostgres ResourceKitTesting PostgresActivity; do
    graphs=$work/$module/graphs
    catalog=$work/$module/$module.docc
    mkdir -p "$graphs" "$catalog"
    # The module's own catalog (landing page and articles), when it has one; the kit's adapter guide has one copy,
    # Docs/WritingAnAdapter.md, which becomes an article of ResourceKitTesting's catalog here.
    [ -d "Sources/$module/$module.docc" ] && cp -R "Sources/$module/$module.docc/." "$catalog/"
    [ "$module" = ResourceKitTesting ] && cp Docs/WritingAnAdapter.md "$catalog/WritingAnAdapter.md"
    swift build --target "$module" -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$graphs" >/dev/null 2>&1 || { echo "$module: build failed"; exit 1; }
    # Only this module's own graphs (the build also writes its dependencies').
    find "$graphs" -name '*.symbols.json' ! -name "$module.symbols.json" ! -name "$module@*.symbols.json" -delete
    out=$(docc convert "$catalog" --additional-symbol-graph-dir "$graphs" --fallback-display-name "$module" \
        --fallback-bundle-identifier "org.resourcekit.$module" --output-path "$work/$module/out" 2>&1)
    warnings=$(echo "$out" | grep -E "(warning|error):" || true)
    count=$(echo -n "$warnings" | grep -c . || true)
    echo "$module: $count docc warning(s)"
    [ -n "$warnings" ] && echo "$warnings" | sed 's/^/  /'
    total=$((total + count))
done
[ "$total" -eq 0 ]
