#!/usr/bin/env python3
"""Checks that docs/ARCHITECTURE.md names only what exists, so that it cannot drift.

- every file it names in backticks exists: a path from the repository's root
  (`Sources/DNSServer/UDPDNSHandler.swift`, `scripts/x.py`), a path within Sources/ or Tests/
  (`DNSServer/UDPDNSHandler.swift`, `Cache/Browse.swift`), or a bare name somewhere under
  Sources/ or Tests/ (`UDPDNSHandler.swift`);
- every type it names in backticks (a CamelCase word with two capitals or more, acronyms
  included: `TypeName`, `DNSServerCounters`, `TypeName.member`) is declared in Sources/ (struct,
  class, enum, protocol, typealias, actor or extension), is a module, or is a library's (EXTERNAL);
- the section "A UDP cache miss, file by file" walks through at most MAX_MISS_FILES files:
  every file under Sources/ it names, however it names it (root path, module path, bare name),
  counted once.

Standard library only; run from anywhere. Exit status 1 with one line per problem.
Usage: scripts/check-architecture.py [--list]   (--list: print the walk's files, one
resolved path per line, then their count)"""
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(REPO, "docs", "ARCHITECTURE.md")
MISS_SECTION = "A UDP cache miss, file by file"
# Every Swift file whose code runs on a UDP cache miss, as the section walks it (16 without
# Sources/DNSWire; issue 43 asked for at most 20).
MAX_MISS_FILES = 20
# Names from the libraries we build on (SwiftNIO, NIOExtras, NIOSSL, swift-metrics and its
# test kit, swift-service-lifecycle, Hummingbird, Foundation/Dispatch), which the document may
# name too. Never a project name: a stale name is fixed in the document.
EXTERNAL = {"ServiceGroup", "ServerQuiescingHelper", "TestMetrics", "MetricsTestKit", "NIOSSLServerHandler",
            "EmbeddedChannel", "DispatchQueue", "ByteBuffer", "EventLoop", "NIOAny"}
SOURCE_EXTENSIONS = ("swift", "py", "sh", "c", "h")


def source_files():
    for top in ("Sources", "Tests"):
        for root, _, names in os.walk(os.path.join(REPO, top)):
            for name in names:
                yield os.path.relpath(os.path.join(root, name), REPO)


def declared_types(files):
    pattern = re.compile(r"\b(?:struct|class|enum|protocol|typealias|actor|extension)\s+([A-Z]\w*)")
    names = set()
    for path in files:
        if path.endswith(".swift") and path.startswith("Sources" + os.sep):
            with open(os.path.join(REPO, path), encoding="utf-8") as f:
                names.update(pattern.findall(f.read()))
    return names


def resolve(token, files):
    """The files (paths from the repository's root) `token` may name: itself from the root, or
    every file under Sources/ or Tests/ whose path ends with it (`/` + a module path, or a name)."""
    if os.path.isfile(os.path.join(REPO, token)):
        return [os.path.normpath(token)]
    return [p for p in files if p.endswith(os.sep + token)]


def type_name(span):
    """The CamelCase type a backticked span names (`DNSServerCounters`, `Browse.lastUsed`), or
    None: at least two capitals and one lower-case letter, so that `Cache`, `SERVFAIL`, `PTR`
    and `QDCOUNT` are not types."""
    match = re.fullmatch(r"([A-Z][A-Za-z0-9]*)(?:\.\w.*)?", span)
    if not match:
        return None
    name = match.group(1)
    if sum(c.isupper() for c in name) < 2 or not re.search(r"[a-z]", name):
        return None
    return name


def section(text, title):
    """The section's text and the line number (1-based) of its first line after the heading."""
    match = re.search(r"^#+ " + re.escape(title) + r"\s*$", text, re.M)
    if not match:
        return None, 0
    rest = text[match.end():]
    end = re.search(r"^#+ ", rest, re.M)
    return (rest[: end.start()] if end else rest), text.count("\n", 0, match.end()) + 1


def file_tokens(span):
    return re.findall(r"[\w+./-]+\.(?:%s)\b" % "|".join(SOURCE_EXTENSIONS), span)


def main():
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    files = sorted(source_files())
    types = declared_types(files) | EXTERNAL | set(os.listdir(os.path.join(REPO, "Sources")))
    problems = []
    for number, line in enumerate(text.split("\n"), 1):
        for span in re.findall(r"`([^`\n]+)`", line):
            tokens = file_tokens(span)
            for token in tokens:
                if not resolve(token, files):
                    problems.append("line %d: names %s, which is no file (from the root, or under Sources/ or Tests/)"
                                    % (number, token))
            name = None if tokens else type_name(span)  # `LDNSSupport.swift` is a file, not a type
            if name and name not in types:
                problems.append("line %d: names the type %s, which Sources/ does not declare" % (number, name))
    walk, first_line = section(text, MISS_SECTION)
    if walk is None:
        problems.append('has no section "%s"' % MISS_SECTION)
    else:
        walked = []
        sources = [p for p in files if p.startswith("Sources" + os.sep)]
        for offset, line in enumerate(walk.split("\n")):
            for span in re.findall(r"`([^`\n]+)`", line):
                for token in file_tokens(span):
                    found = resolve(token, files)
                    if not found or not all(p.startswith("Sources" + os.sep) for p in found):
                        continue  # reported above, or not a source file (`scripts/test.sh`)
                    found = [p for p in found if p in sources] or found
                    if len(found) > 1:
                        problems.append("line %d: names %s, which is ambiguous (%s): name it by its module path"
                                        % (first_line + offset, token, ", ".join(found)))
                        continue
                    if found[0] not in walked:
                        walked.append(found[0])
        if "--list" in sys.argv:
            print("\n".join(walked))
            wire = sum(1 for p in walked if p.startswith(os.path.join("Sources", "DNSWire") + os.sep))
            print("%d files (%d without Sources/DNSWire); at most %d allowed" % (len(walked), len(walked) - wire,
                                                                                 MAX_MISS_FILES))
        if len(walked) > MAX_MISS_FILES:
            problems.append("walks a cache miss through %d files (at most %d): %s"
                            % (len(walked), MAX_MISS_FILES, ", ".join(walked)))
    for problem in sorted(set(problems), key=lambda p: (int(re.match(r"line (\d+)", p).group(1))
                                                        if p.startswith("line ") else 0, p)):
        print("docs/ARCHITECTURE.md " + problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
