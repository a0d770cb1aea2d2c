import DNSWire
import MDNS

extension BrowseTable {
    /// Types whose browses often share a name: an instance's SRV and TXT, a host's A and AAAA.
    private static let siblingTypes: [RRType] = [.srv, .txt, .a, .aaaa]

    /// `key` with its name in storage the proxy already holds, when something holds the very
    /// same bytes: another browse at that name (an instance's SRV for its TXT), or the PTR
    /// record that named the instance (its RDATA is the instance name's wire form). A new
    /// browse otherwise keeps the copy its query brought: one more name per browse, and the
    /// proxy holds two browses per known instance. Called when a browse is created.
    func sharingStorage(_ key: BrowseKey) -> BrowseKey {
        var key = key
        for type in Self.siblingTypes where type != key.type {
            let sibling = BrowseKey(interface: key.interface, name: key.name, type: type)
            guard let index = browses.index(forKey: sibling) else { continue }
            let stored = browses.keys[index].name.wireBytes
            if stored == key.name.wireBytes {
                key.name = key.name.sharingStorage(with: stored)
                return key
            }
        }
        guard key.type == .srv || key.type == .txt, key.name.labelCount > 1 else { return key }
        let parent = key.name.dropping(labels: 1)
        let probe = MDNSRecord(name: parent, type: .ptr, rdata: key.name.wireBytes)
        if let stored = browses[BrowseKey(interface: key.interface, name: parent, type: .ptr)]?
            .records.storedRecord(equalTo: probe)
        {
            key.name = key.name.sharingStorage(with: stored.rdata)
        }
        return key
    }
}
