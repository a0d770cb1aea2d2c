import DNSWire

/// Bytes from a hex string; spaces are ignored.
func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.filter { !$0.isWhitespace })
    precondition(digits.count % 2 == 0, "odd hex string")
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0...$0 + 1]), radix: 16)! }
}

func name(_ text: String) -> DNSName {
    try! DNSName(text)
}

extension Array where Element == UInt8 {
    /// The offset of the first occurrence of `needle`, if any.
    func firstRange(of needle: [UInt8]) -> Int? {
        guard !needle.isEmpty, needle.count <= self.count else { return nil }
        for start in 0...(self.count - needle.count) where self[start..<(start + needle.count)].elementsEqual(needle) {
            return start
        }
        return nil
    }

    var header: MessageHeader { MessageHeader(self)! }
}

extension MessageHeader {
    var truncatedFlag: Bool { self.flags & 0x0200 != 0 }
    var headerRCode: UInt16 { self.flags & 0x000F }
}

/// Real queries captured from dig 9.x (`dig @127.0.0.1 -p P ...`).
enum DigQueries {
    /// `dig +noedns +norec _ipp._tcp.example. PTR`
    static let ptrNoEDNS = hex("feed00200001000000000000045f697070045f746370076578616d706c6500000c0001")
    /// `dig +norec +nocookie My\032Printer._ipp._tcp.example. SRV`
    static let srvWithSpace = hex(
        "3a55002000010000000000010a4d79205072696e746572045f697070045f746370076578616d706c6500"
            + "0021000100002904d0000000000000"
    )
    /// `dig +norec +cookie=0102030405060708 +dnssec +bufsize=1232 lab1.example. SOA`
    static let soaWithCookieAndDO = hex(
        "92cf00200001000000000001046c616231076578616d706c65000006000100002904d000008000000c000a00080102030405060708"
    )
    /// `dig +edns=1 +nocookie +ednsopt=65001:00 bldg-1.example.com SOA`
    static let ednsVersion1 = hex(
        "39f30120000100000000000106626c64672d31076578616d706c6503636f6d000006000100002904d0000100000005fde9000100"
    )
}
