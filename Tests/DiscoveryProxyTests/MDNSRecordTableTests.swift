import DNSWire
import MDNS
import Testing

@_spi(Testing) @testable import DiscoveryProxy

@Suite("mDNS record table") struct MDNSRecordTableTests {
    private func record(_ n: Int) throws -> MDNSRecord {
        MDNSRecord(name: try DNSName("host-\(n).local."), type: .a, rdata: [192, 0, 2, UInt8(n % 256)])
    }

    @Test func behavesLikeADictionaryAcrossTheIndexThreshold() throws {
        var table = MDNSRecordTable<Int>()
        var mirror: [MDNSRecord: Int] = [:]
        // Grow well past the threshold, shrink below it, grow again: the same answers throughout.
        let steps =
            Array(0..<40).map { ($0, true) } + Array(0..<36).map { ($0 * 7 % 40, false) }
            + Array(40..<50).map { ($0, true) }
        for (n, add) in steps {
            let r = try record(n)
            if add {
                table[r] = n
                mirror[r] = n
            } else {
                #expect(table.removeValue(forKey: r) == mirror.removeValue(forKey: r))
            }
            #expect(table.count == mirror.count)
            for m in 0..<50 {
                let probe = try record(m)
                #expect(table[probe] == mirror[probe])
            }
        }
        #expect(Set(table.records) == Set(mirror.keys))
        #expect(table.values.sorted() == mirror.values.sorted())
    }

    @Test func updatesDefaultsAndRemoval() throws {
        var table = MDNSRecordTable<Int>()
        let r = try record(1)
        #expect(table.isEmpty)
        #expect(table[r, default: 0] == 0)
        table[r] = table[r, default: 0] + 1
        table[r] = table[r, default: 0] + 1
        #expect(table[r] == 2 && table.count == 1)
        // Records that differ only in the case of their name are the same record.
        let upper = MDNSRecord(name: try DNSName("HOST-1.local."), type: .a, rdata: [192, 0, 2, 1])
        #expect(table[upper] == 2)
        table[upper] = nil
        #expect(table.isEmpty)
        #expect(table.removeValue(forKey: r) == nil)
        table[r] = 5
        table.removeAll()
        #expect(table.isEmpty && table[r] == nil)
    }

    @Test(arguments: [5, 30]) func updatesAndRemovesByValue(size: Int) throws {
        var table = MDNSRecordTable<Int>()
        for n in 0..<size { table[try record(n)] = n }
        table.updateValues { $0 *= 10 }
        #expect(try table[record(3)] == 30)
        let removed = table.removeAll { $0 % 20 == 0 }
        #expect(Set(removed.map(\.value)) == Set(stride(from: 0, to: size * 10, by: 20)))
        #expect(table.count == size - removed.count)
        // Lookups still work, through the index or the array, after the bulk removal.
        for n in 0..<size { #expect(try table[record(n)] == (n % 2 == 0 ? nil : n * 10)) }
    }
}
