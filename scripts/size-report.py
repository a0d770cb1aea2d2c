#!/usr/bin/env python3
"""Where does the size of a binary go?  Per-module / per-dependency size report.

Usage:  /usr/bin/python3 scripts/size-report.py BINARY [--top N] [--detail]
                                                [--json OUT] [--no-demangle]

Reads `size -A` and `nm --size-sort -S --defined-only` (`nm -D` if the binary is
stripped: exported symbols only) and gives each byte a symbol covers to a component:

  * Swift symbols ($s...): the module in the mangling ($s7NIOCore... -> NIOCore),
    refined by one batched `swift demangle --compact` call for extensions and
    conformances ("(extension in NIOCore):Swift.Array" -> NIOCore).  Other `$ss` /
    `$sS.` manglings are "Swift stdlib" (in a binary that links the stdlib
    dynamically: generic specialisations emitted by the other modules), `So`/`SC`
    are "C imports".  NIO* modules are one row unless --detail is given.
  * C/C++ symbols by prefix: CNIOBoringSSL / CCryptoBoringSSL (the two BoringSSL
    copies), ICU, CoreFoundation, libdispatch, Swift runtime, CYaml, ...
  * Symbols no rule matches (static C functions, std:: template instances, Swift
    helpers such as `objectdestroy`) take the component of their neighbours when
    the nearest known symbols before and after them agree (the linker lays out
    each object file contiguously); column "inferred" shows those bytes.  The
    rest is "other C" / "Swift (unresolved)" / "C++ std:: templates".

"total" is the sum of the allocated, file-backed sections (what is mapped from
the file: code, rodata, data, eh_frame, relocations, dynsym, ...).  Aliases and
overlapping symbols count once, so the components plus "(no symbol)" -- alignment
padding, .eh_frame, .rela.dyn, rodata without symbols -- add up exactly to it.
Debug info, .symtab and .swift_ast are not loaded and get one line; .bss takes
no file space and is shown separately.
"""
import argparse
import bisect
import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict

NOBITS = {".bss", ".tbss", ".sbss"}
STDLIB = {"Swift", "_Concurrency", "_StringProcessing", "_RegexParser", "Synchronization",
          "Distributed", "Observation", "_Volatile", "_Builtin_float", "SwiftOnoneSupport",
          "Cxx", "CxxStdlib", "Glibc", "Musl"}
C_RULES = [(re.compile(rx), comp) for rx, comp in [
    (r"CNIOBoringSSL", "BoringSSL (swift-nio-ssl)"),
    (r"CCryptoBoringSSL", "BoringSSL (swift-crypto)"),
    (r"icu_\d|icudt|^(swift_)?u(|col|brk|res|prv|cnv|set|loc|data|str|cal|num)_"
     r"|^swift_u[a-z]+_|^u[a-z]+_\w+_\d\d$|^(_ZL\d+)?(ucase|ubidi|norm2|uprops|props[VT])",
     "ICU"), (r"_swift_stdlib_", "Swift"),  # the stdlib's Unicode tables
    (r"^_?ldns_", "libldns"), (r"^avahi_", "avahi-client"), (r"^yaml_", "libyaml"),
    (r"^_?_?dispatch_|^DISPATCH_", "libdispatch"),
    (r"^(_{0,2}CF|_{0,2}kCF)", "CoreFoundation"),
    (r"^_Z(T[VIS])?N?K?S[tabsiod]|^_ZN9__gnu_cxx|^_ZN10__cxxabiv1|^__cxa_|^__gxx_",
     "C++ std:: templates"),
    (r"^_?swift_|^_ZN?K?5swift|swiftBacktrace", "Swift runtime"),
    (r"^(deflate|inflate|crc32|adler32|zlib|_tr_|z_)", "zlib"),
    (r"^(catmc_|_?c_nio_|CNIO|cnio_)", "CNIO* C shims"),
    (r"^(Keccak|SHAKE|CXKCP|SHA3_)", "CXKCP (swift-crypto)"),
    (r"^_sa_|^_AtomicsShims", "_AtomicsShims"), (r"^csystem_", "CSystem"),
    (r"^_Block_", "BlocksRuntime"), (r"^(_GLOBAL_OFFSET_TABLE_|_DYNAMIC)$", "linker (GOT)"),
    (r"^(_start|_init|_fini|__libc_csu\w*|frame_dummy|__do_global_\w+|_?_?register_tm_clones"
     r"|deregister_tm_clones|_dl_relocate_static_pie)$", "C startup (crt)"),
]]
SWIFTISH = re.compile(r"objectdestroy|block_(copy|destroy|descriptor)|__swift_|l__swift|"
                      r"__unnamed_|^_?\$s|\s")
NIO_GROUP = "SwiftNIO (NIOCore, NIOPosix, …)"


def run(cmd, stdin=None):
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True).stdout


def swift_module(m, nested=False):
    """Module of a mangled name with the `$s` already removed."""
    if m.startswith(("So", "SC")):
        return "__C"
    if m[:1] in ("s", "S"):
        return "Swift"
    mo = re.match(r"([1-9]\d*)", m)
    if not mo:
        return None
    end = len(mo.group(1)) + int(mo.group(1))
    if m.endswith("Tl") and not nested:  # associated type: $s<name><protocol>Tl
        return swift_module(m[end:], True)
    if re.match(r"Sc?[a-zA-Z]Q", m[end:]):  # A.Element (dependent member): a thunk
        return None
    return m[len(mo.group(1)):end]


def classify(name):
    """-> (component detail name or None, "$s" / "swiftish" / "c")"""
    if name.startswith("got."):
        name = name[4:]
    if name.startswith(("$s", "_$s")):
        return swift_module(name[name.index("$s") + 2:]), "$s"
    if " " in name:  # "symbolic _____ 7NIOCore...", "associated conformance 4X509..."
        for tok in name.split(" ")[1:]:
            if re.match(r"[0-9sS]", tok):
                return swift_module(tok), "swiftish"
        return None, "swiftish"
    for rx, comp in C_RULES:
        if rx.search(name):  # std:: templates are instantiated by the code using them
            return (None, comp) if comp.startswith("C++") else (comp, "c")
    return None, "c"


GROUPS = [(re.compile(rx), g) for rx, g in [
    (r"^__C$", "C imports (So/SC manglings)"), (r"^_?NIO|^CNIO\* C", NIO_GROUP),
    (r"^_?Foundation", "Foundation (Swift)"),
    (r"^_?Crypto|^CXKCP", "swift-crypto (Crypto, _CryptoExtras, XKCP)")]]


def group(detail):
    if detail in STDLIB:
        return "Swift stdlib"
    return next((g for rx, g in GROUPS if rx.match(detail)), detail)


def refine_with_demangler(syms, modules):
    """Re-attribute extensions and conformances (of stdlib, C or Foundation types)
    to the module that defines them, using one batched `swift demangle` call."""
    idx = [i for i, s in enumerate(syms) if s["kind"] == "$s"]
    names = "\n".join(syms[i]["name"].removeprefix("got.") for i in idx) + "\n"
    out = run(["swift", "demangle", "--compact"], names).split("\n") if idx else []
    for i, text in zip(idx, out) if len(out) > len(idx) else []:
        mo = re.search(r"\(extension in (\w+)\):", text) or re.search(r" in (\w+)$", text)
        if mo and mo.group(1) in modules and mo.group(1) not in ("Swift", "__C"):
            syms[i]["comp"] = mo.group(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("binary")
    ap.add_argument("--top", type=int, default=25, help="component rows to print")
    ap.add_argument("--detail", action="store_true", help="per module, no grouping")
    ap.add_argument("--json", metavar="OUT", help="also write the numbers as JSON")
    ap.add_argument("--no-demangle", action="store_true")
    args = ap.parse_args()

    rows = [line.split() for line in run(["size", "-A", args.binary]).splitlines()[2:]]
    rows = [(r[0], int(r[1]), int(r[2])) for r in rows if len(r) == 3 and r[1].isdigit()]
    sections = sorted((r for r in rows if r[1] and r[2]), key=lambda s: s[2])  # allocated
    other = sum(r[1] for r in rows if not r[2])  # not loaded: debug info, .symtab, ...
    if not sections:
        sys.exit(f"{args.binary}: unreadable, or size -A finds no allocated sections")
    mapped = [s for s in sections if s[0] not in NOBITS]
    starts = [s[2] for s in mapped]

    source = "nm (.symtab)"
    out = run(["nm", "--size-sort", "-S", "--defined-only", args.binary])
    if not out.strip():
        source = "nm -D (stripped binary: exported symbols only)"
        out = run(["nm", "-D", "--size-sort", "-S", "--defined-only", args.binary])
    syms = []
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and int(parts[1], 16) > 0:
            comp, kind = classify(parts[3])
            syms.append({"addr": int(parts[0], 16), "size": int(parts[1], 16),
                         "name": parts[3], "comp": comp, "kind": kind})
    modules = {s["comp"] for s in syms if s["kind"] == "$s"} | {"Swift", "__C"}
    for s in syms:  # a "symbolic 7Element..." token need not be a module name
        if s["kind"] == "swiftish" and s["comp"] not in modules:
            s["comp"] = None
    if not args.no_demangle and shutil.which("swift"):
        refine_with_demangler(syms, modules)

    # Assign symbols to sections by address, then fill unknowns from neighbours.
    by_sec = defaultdict(list)
    bss_syms = outside = 0
    for s in syms:
        i = bisect.bisect_right(starts, s["addr"]) - 1
        if i >= 0 and s["addr"] < mapped[i][2] + mapped[i][1]:
            by_sec[i].append(s)
        elif any(a <= s["addr"] < a + n for nm_, n, a in sections if nm_ in NOBITS):
            bss_syms += s["size"]
        else:
            outside += s["size"]  # TLS offsets, absolute symbols
    comp_bytes, inferred, covered = defaultdict(int), defaultdict(int), {}
    for i, lst in by_sec.items():
        lst.sort(key=lambda s: (s["addr"], -s["size"]))
        prev, nxt = [None] * len(lst), [None] * len(lst)
        for k in range(1, len(lst)):
            prev[k] = lst[k - 1]["comp"] or prev[k - 1]
            nxt[-k - 1] = lst[-k]["comp"] or nxt[-k]
        name, size, start = mapped[i]
        end_sec, reach, cov = start + size, start, 0
        for k, s in enumerate(lst):
            lo, hi = max(s["addr"], reach), min(s["addr"] + s["size"], end_sec)
            if hi <= lo:
                continue
            reach, cov = hi, cov + hi - lo
            comp, guessed = s["comp"], False
            if comp is None:
                if prev[k] and prev[k] == nxt[k]:
                    comp, guessed = prev[k], True
                elif s["kind"].startswith("C++"):
                    comp = s["kind"]
                else:
                    comp = "Swift (unresolved)" if SWIFTISH.search(s["name"]) else "other C"
            key = comp if args.detail else group(comp)
            comp_bytes[key] += hi - lo
            if guessed:
                inferred[key] += hi - lo
        covered[i] = cov

    total = sum(s[1] for s in mapped)
    uncovered = total - sum(comp_bytes.values())
    assert uncovered == sum(s[1] - covered.get(i, 0) for i, s in enumerate(mapped))

    def pct(n):
        return f"{100.0 * n / total:5.1f}%"
    print(f"{args.binary}\nsymbols: {source}, {len(syms):,} with a size; "
          f"allocated file-backed sections: {total:,} bytes\n")
    rows = sorted(comp_bytes.items(), key=lambda kv: -kv[1])
    w = max([len(k) for k, _ in rows[:args.top]] + [34])
    print(f"{'component':<{w}} {'bytes':>12} {'share':>6} {'inferred':>10}")
    for k, n in rows[:args.top]:
        print(f"{k:<{w}} {n:>12,} {pct(n)} {inferred.get(k, 0):>10,}")
    if rows[args.top:]:
        n = sum(v for _, v in rows[args.top:])
        print(f"{f'({len(rows) - args.top} more components)':<{w}} {n:>12,} {pct(n)}")
    print(f"{'(no symbol: padding, eh_frame, relocs…)':<{w}} {uncovered:>12,} {pct(uncovered)}")
    print(f"{'total':<{w}} {total:>12,} {pct(total)}\n")

    print(f"{'section':<30} {'size':>12} {'in symbols':>12} {'no symbol':>12}")
    for i, (name, size, _) in sorted(enumerate(mapped), key=lambda t: -t[1][1]):
        if size >= 4096:
            c = covered.get(i, 0)
            print(f"{name:<30} {size:>12,} {c:>12,} {size - c:>12,}")
    small = [(i, s) for i, s in enumerate(mapped) if s[1] < 4096]
    n, c = sum(s[1] for _, s in small), sum(covered.get(i, 0) for i, _ in small)
    print(f"{f'({len(small)} sections < 4 KiB)':<30} {n:>12,} {c:>12,} {n - c:>12,}")
    bss = sum(s[1] for s in sections if s[0] in NOBITS)
    print(f"\n.bss/.tbss (zero-filled at run time, no file space): {bss:,} bytes, "
          f"{bss_syms:,} in symbols; TLS/absolute symbols: {outside:,} bytes")
    print(f"not loaded (debug info, .symtab, .swift_ast, …): {other:,} bytes")

    if args.json:
        with open(args.json, "w") as f:
            json.dump({"binary": args.binary, "symbols": source, "total": total,
                       "components": dict(rows), "inferred": dict(inferred),
                       "no_symbol": uncovered, "bss": bss, "not_loaded": other,
                       "sections": {s[0]: {"size": s[1], "in_symbols": covered.get(i, 0)}
                                    for i, s in enumerate(mapped)}}, f, indent=2)


if __name__ == "__main__":
    main()
