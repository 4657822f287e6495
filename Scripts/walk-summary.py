#!/usr/bin/env python3
"""One walk's summary (Scripts/walks): the library files and types whose code ran inside the coverage window.

    walk-summary.py NAME EXPORT SOURCES [--functions] [--json OUT]   summarise one walk (llvm-cov's export)
    walk-summary.py --record RESULTS COMMIT WALK.json...             write the walks' counts and lists
    walk-summary.py --check BOUNDS WALK.json...                      exit 1 when a walk is past its bound

Counted: the modules a user's program links for the walk (the core, the I/O runtime, the adapters); the test
harness's own modules (ResourceKitTesting, the test targets) are left out.
"""
import collections
import datetime
import json
import re
import subprocess
import sys


def record(results, commit, walks):
    data = {"about": "The two walks of Docs/Architecture.md (\"Two walks\"), written by `Scripts/walks --record`: "
                     "the library files and types that run from the cancel to the end of each walk.",
            "date": datetime.date.today().isoformat(), "commit": commit, "walks": {}}
    for path in walks:
        walk = json.load(open(path))
        data["walks"][walk["name"]] = {k: walk[k] for k in ("files", "types", "fileList", "typeList")}
    with open(results, "w") as out:
        json.dump(data, out, indent=2)
        out.write("\n")
    print(f"recorded {', '.join(data['walks'])} in {results}")


def check(bounds, walks):
    limits = json.load(open(bounds))["walks"]
    failed = False
    seen = set()
    for path in walks:
        walk = json.load(open(path))
        name = walk["name"]
        seen.add(name)
        bound = limits.get(name)
        if bound is None:
            print(f"FAILED: {name} has no bound in {bounds}")
            failed = True
            continue
        for what in ("files", "types"):
            verdict = "ok" if walk[what] <= bound[what] else "FAILED"
            failed |= verdict != "ok"
            print(f"{verdict}: {name}: {walk[what]} {what} (bound {bound[what]}, target {bound.get('target', {}).get(what, '-')})")
    for name in sorted(set(limits) - seen):
        print(f"FAILED: {name} is bounded in {bounds} but was not walked")
        failed = True
    sys.exit(1 if failed else 0)


if sys.argv[1] == "--record":
    record(sys.argv[2], sys.argv[3], sys.argv[4:])
    sys.exit(0)
if sys.argv[1] == "--check":
    check(sys.argv[2], sys.argv[3:])

LIBRARY = {"ResourceKit", "ResourceKitIO", "SocketAdapter", "PostgresAdapter", "ResourceKitObservation",
           "ResourceKitPatterns"}

name, export, sources = sys.argv[1], sys.argv[2], sys.argv[3].rstrip("/") + "/"
show_functions = "--functions" in sys.argv[4:]
json_out = sys.argv[sys.argv.index("--json") + 1] if "--json" in sys.argv[4:] else None
ran = collections.defaultdict(set)
for function in json.load(open(export))["data"][0]["functions"]:
    if function["count"] == 0:
        continue
    for filename in function["filenames"]:
        if filename.startswith(sources) and filename.split("/")[len(sources.split("/")) - 1] in LIBRARY:
            ran[filename[len(sources):]].add(function["name"])

mangled = sorted({f for functions in ran.values() for f in functions})
demangled = dict(zip(mangled, subprocess.run(
    ["swift", "demangle", "--simplified", "--compact"], input="\n".join(mangled), capture_output=True,
    text=True, check=True).stdout.splitlines()))


def owner(symbol):
    """The type a function belongs to (`swift demangle --simplified` names carry no module), or None."""
    text = demangled.get(symbol, symbol)
    text = re.sub(r"^((implicit )?closure #\d+ (in )?|.*? of |(generic )?specialization <.*?> of )+", "", text)
    text = re.sub(r"^(static |extension in \w+:)", "", text)
    text = re.sub(r"<[^<>]*>", "", re.split(r"\(", text, maxsplit=1)[0].strip())
    path = [part for part in text.split(".") if part]
    if path and path[-1] in ("getter", "setter", "modify", "_modify", "read", "unsafeAddressor", "didset", "willset"):
        path = path[:-1]
    return ".".join(path[:-1]) or None  # None: a free function


# The standard library's types that the walk's files extend are not the project's types.
STANDARD = {"Bool", "Error", "Int", "Int32", "Int64", "UInt", "UInt64", "Optional", "Array", "String", "Duration",
            "ContinuousClock.Instant"}
types = sorted({t for functions in ran.values() for f in functions if (t := owner(f)) and t not in STANDARD})
print(f"## {name}: {len(ran)} files, {len(types)} types")
for filename in sorted(ran):
    print(f"- {filename}")
    if show_functions:
        for function in sorted(demangled.get(f, f) for f in ran[filename]):
            print(f"    {function}")
print("types: " + ", ".join(types))
if json_out:
    with open(json_out, "w") as out:
        json.dump({"name": name, "files": len(ran), "types": len(types), "fileList": sorted(ran), "typeList": types}, out)
