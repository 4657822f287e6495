#!/usr/bin/env python3
"""One walk's summary (Scripts/walks): the library files and types whose code ran inside the coverage window.

Arguments: the walk's name, llvm-cov's export (JSON), the Sources directory, and optionally --functions.
Counted: the modules a user's program links for the walk (the core, the I/O runtime, the adapters); the test
harness's own modules (ResourceKitTesting, the test targets) are left out.
"""
import collections
import json
import re
import subprocess
import sys

LIBRARY = {"ResourceKit", "ResourceKitIO", "SocketAdapter", "PostgresAdapter", "ResourceKitObservation",
           "ResourceKitPatterns"}

name, export, sources = sys.argv[1], sys.argv[2], sys.argv[3].rstrip("/") + "/"
show_functions = "--functions" in sys.argv[4:]
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
