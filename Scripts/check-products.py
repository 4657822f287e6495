#!/usr/bin/env python3
"""Every product the docs name resolves: `.product(name: "X"` in the README, Docs/ and the DocC catalogues, and
prose that calls `X` a product ("`X` is a separate product", "product `X`"), must name a product of Package.swift.
Exits 1 and lists each one that does not (a reader who copies it gets "product 'X' not found").

    Scripts/check-products.py
"""
import pathlib
import re
import sys

root = pathlib.Path(__file__).resolve().parent.parent
products = set(re.findall(r'\.(?:library|executable)\(name: "([^"]+)"', (root / "Package.swift").read_text()))
documents = [root / "README.md", *sorted((root / "Docs").rglob("*.md")), *sorted((root / "Sources").glob("*/*.docc/*.md"))]
patterns = [
    re.compile(r'\.product\(name: "([^"]+)"'),
    re.compile(r'`([A-Za-z_][A-Za-z0-9_]*)` is (?:a |an )?(?:separate |its own )?product'),
    re.compile(r'product `([A-Za-z_][A-Za-z0-9_]*)`'),
]
unresolved = []
for document in documents:
    for number, line in enumerate(document.read_text().splitlines(), start=1):
        for pattern in patterns:
            for name in pattern.findall(line):
                if name not in products:
                    unresolved.append(f"{document.relative_to(root)}:{number}: product '{name}' is not in Package.swift")
if unresolved:
    print("\n".join(unresolved))
    print(f"products: {', '.join(sorted(products))}")
    sys.exit(1)
print(f"products named in {len(documents)} documents: all resolve")
