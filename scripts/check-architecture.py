#!/usr/bin/env python3
"""Checks that docs/ARCHITECTURE.md names only what exists, so that it cannot drift.

- every file it names in backticks (`Sources/.../X.swift`, `X.swift`, `scripts/x.py`) exists:
  a path as given, a bare name somewhere under Sources/ or Tests/;
- every type it names in backticks (a CamelCase word, `TypeName` or `TypeName.member`) is
  declared in Sources/ (struct, class, enum, protocol, typealias, actor or extension);
- the section "A UDP cache miss, file by file" walks through at most 12 files (those it
  names by their path from the repository's root).

Standard library only; run from anywhere. Exit status 1 with one line per problem.
Usage: scripts/check-architecture.py [--list]   (--list: print the walk's files)"""
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "ARCHITECTURE.md")
MISS_SECTION = "A UDP cache miss, file by file"
MAX_MISS_FILES = 12
# Names from the libraries we build on, which the document may name too.
EXTERNAL = {"ServiceGroup", "ServerQuiescingHelper", "TestMetrics", "MetricsTestKit", "NIOSSLServerHandler",
            "EmbeddedChannel", "DispatchQueue", "ByteBuffer", "EventLoop", "NIOAny"}


def source_files():
    for top in ("Sources", "Tests"):
        for root, _, names in os.walk(os.path.join(REPO, top)):
            for name in names:
                yield os.path.join(root, name)


def declared_types(files):
    pattern = re.compile(r"\b(?:struct|class|enum|protocol|typealias|actor|extension)\s+([A-Z]\w*)")
    names = set()
    for path in files:
        if path.endswith(".swift") and "/Sources/" in path:
            with open(path, encoding="utf-8") as f:
                names.update(pattern.findall(f.read()))
    return names


def section(text, title):
    match = re.search(r"^#+ " + re.escape(title) + r"\s*$", text, re.M)
    if not match:
        return None
    rest = text[match.end():]
    end = re.search(r"^#+ ", rest, re.M)
    return rest[: end.start()] if end else rest


def main():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    files = list(source_files())
    basenames = {os.path.basename(p) for p in files}
    types = declared_types(files) | EXTERNAL | set(os.listdir(os.path.join(REPO, "Sources")))
    problems = []
    spans = re.findall(r"`([^`\n]+)`", text)
    for span in spans:
        for token in re.findall(r"[\w+./-]+\.(?:swift|py|sh)\b", span):
            if "/" in token:
                # A path from the repository's root, or within a module (`Cache/Browse.swift`).
                if not os.path.exists(os.path.join(REPO, token)) and not any(p.endswith("/" + token) for p in files):
                    problems.append("names %s, which does not exist" % token)
            elif token not in basenames:
                problems.append("names %s, which is no file under Sources/ or Tests/" % token)
        match = re.fullmatch(r"([A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+)(?:\.\w+.*)?", span)
        if match and match.group(1) not in types:
            problems.append("names the type %s, which Sources/ does not declare" % match.group(1))
    walk = section(text, MISS_SECTION)
    if walk is None:
        problems.append('has no section "%s"' % MISS_SECTION)
    else:
        walked = []
        # The steps name each file by its full path; files mentioned by a bare or module
        # path are details on the way, not steps.
        for token in re.findall(r"`(Sources/[\w+./-]+\.swift)`", walk):
            name = os.path.basename(token)
            if name not in walked:
                walked.append(name)
        if "--list" in sys.argv:
            print("\n".join(walked))
        if len(walked) > MAX_MISS_FILES:
            problems.append("walks a cache miss through %d files (at most %d): %s"
                            % (len(walked), MAX_MISS_FILES, ", ".join(walked)))
    for problem in sorted(set(problems)):
        print("docs/ARCHITECTURE.md " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
