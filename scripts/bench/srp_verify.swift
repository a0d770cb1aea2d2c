// The registrar's SIG(0) check timed on one core (scripts/bench/srp.py, row l): the release
// build's own DNSWire (SIG0.find, SIG0.isValid, which calls Sources/CSignature's
// dp_p256_verify on the system's libcrypto), compiled against the objects `swift build -c
// release` left in .build/release, so nothing in Package.swift changes for it.
//
//     srp-verify UPDATE_HEX KEY_RDATA_HEX SECONDS
//
// prints `verify N PER_S`, `find+verify N PER_S`, `bad N` (a changed signature must fail).
import DNSWire

#if canImport(Glibc)
import Glibc
#endif

func bytes(_ hex: String) -> [UInt8] {
    var out: [UInt8] = []
    var high: UInt8?
    for c in hex.utf8 {
        let v: UInt8
        switch c {
        case 48...57: v = c - 48
        case 97...102: v = c - 87
        case 65...70: v = c - 55
        default: continue
        }
        if let h = high {
            out.append(h << 4 | v)
            high = nil
        } else {
            high = v
        }
    }
    return out
}

func now() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

let args = CommandLine.arguments
guard args.count == 4, let seconds = Double(args[3]) else {
    print("usage: srp-verify UPDATE_HEX KEY_RDATA_HEX SECONDS")
    exit(2)
}
let wire = bytes(args[1])
guard let key = SIG0Key(rdata: bytes(args[2])), let sig = try SIG0.find(in: wire) else {
    print("no key or no SIG(0)")
    exit(1)
}
guard sig.isValid(for: key) else {
    print("the signature does not verify")
    exit(1)
}

/// Runs `body` in batches of 64 until `seconds` have passed; returns (calls, calls per second).
func timed(_ body: () -> Bool) -> (Int, Double) {
    var calls = 0
    var ok = 0
    let start = now()
    var elapsed = 0.0
    while elapsed < seconds {
        for _ in 0..<64 where body() { ok += 1 }
        calls += 64
        elapsed = now() - start
    }
    precondition(ok == calls, "a verification failed")
    return (calls, Double(calls) / elapsed)
}

let alone = timed { sig.isValid(for: key) }
print("verify \(alone.0) \(alone.1)")
let found = timed {
    guard let s = try? SIG0.find(in: wire) else { return false }
    return s.isValid(for: key)
}
print("find+verify \(found.0) \(found.1)")
var bad = sig
bad.signature[63] ^= 1
var rejected = 0
for _ in 0..<100 where !bad.isValid(for: key) { rejected += 1 }
print("bad \(rejected)")
