import MDNS

/// The records of one mDNS query mapped to values, laid out for what a query usually holds:
/// one record (an SRV, a TXT, an address) or a few.
///
/// Up to `indexThreshold` entries it is one small array searched linearly: a fraction of the
/// memory of a `Dictionary`, whose smallest storage has a header, a bitmap and room for
/// several entries. The proxy holds one of these per browse and a browse per SRV, TXT and
/// address name it was asked, so this is much of its memory per known instance. Above the
/// threshold a hash index is kept beside the array, so that a service type with thousands of
/// instances stays O(1) per event.
struct MDNSRecordTable<Value> {
    private var entries: [(record: MDNSRecord, value: Value)] = []
    /// Position of each record in `entries`, only while there are more than `indexThreshold`.
    private var index: [MDNSRecord: Int]?

    /// A service type's PTR browse holds one record per instance; most types on a site have a
    /// few dozen at most. Searching 32 entries (only when mDNS reports a change) costs far
    /// less than an index for every such type would hold: about 80 bytes per instance.
    static var indexThreshold: Int { 32 }

    init() {}

    var count: Int { entries.count }
    var isEmpty: Bool { entries.isEmpty }
    var records: some Collection<MDNSRecord> { entries.lazy.map(\.record) }
    var values: some Collection<Value> { entries.lazy.map(\.value) }

    subscript(record: MDNSRecord) -> Value? {
        get { position(of: record).map { entries[$0].value } }
        set {
            if let newValue {
                set(newValue, for: record)
            } else {
                removeValue(forKey: record)
            }
        }
    }

    /// The record as stored, equal to `record`: lets a holder share the stored arrays.
    func storedRecord(equalTo record: MDNSRecord) -> MDNSRecord? {
        position(of: record).map { entries[$0].record }
    }

    subscript(record: MDNSRecord, default value: @autoclosure () -> Value) -> Value {
        self[record] ?? value()
    }

    @discardableResult
    mutating func removeValue(forKey record: MDNSRecord) -> Value? {
        guard let position = position(of: record) else { return nil }
        let removed = entries[position].value
        // Swap-remove: order is not kept (holders that need one keep their own).
        let last = entries.count - 1
        if position != last {
            entries[position] = entries[last]
            index?[entries[position].record] = position
        }
        entries.removeLast()
        index?[record] = nil
        if entries.count <= Self.indexThreshold / 2 { index = nil }
        return removed
    }

    mutating func removeAll() {
        entries = []
        index = nil
    }

    /// Changes every value in place.
    mutating func updateValues(_ body: (inout Value) -> Void) {
        for position in entries.indices { body(&entries[position].value) }
    }

    /// Removes the entries whose value matches; returns them.
    mutating func removeAll(where shouldRemove: (Value) -> Bool) -> [(record: MDNSRecord, value: Value)] {
        let removed = entries.filter { shouldRemove($0.value) }
        guard !removed.isEmpty else { return [] }
        entries.removeAll { shouldRemove($0.value) }
        reindex()
        return removed
    }

    private mutating func set(_ value: Value, for record: MDNSRecord) {
        if let position = position(of: record) {
            entries[position].value = value
            return
        }
        entries.append((record, value))
        if index != nil {
            index![record] = entries.count - 1
        } else if entries.count > Self.indexThreshold {
            reindex()
        }
    }

    /// Builds the hash index when above the threshold, drops it below.
    private mutating func reindex() {
        guard entries.count > Self.indexThreshold else {
            index = nil
            return
        }
        var built: [MDNSRecord: Int] = [:]
        built.reserveCapacity(entries.count * 2)
        for (position, entry) in entries.enumerated() { built[entry.record] = position }
        index = built
    }

    private func position(of record: MDNSRecord) -> Int? {
        if let index { return index[record] }
        return entries.firstIndex { $0.record == record }
    }
}

extension MDNSRecordTable: Sequence {
    func makeIterator() -> IndexingIterator<[(record: MDNSRecord, value: Value)]> {
        entries.makeIterator()
    }
}

extension MDNSRecordTable: Sendable where Value: Sendable {}
