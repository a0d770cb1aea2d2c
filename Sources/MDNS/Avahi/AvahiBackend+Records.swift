internal import CAvahiClient
import DNSWire
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A query's records: avahi's browser events translated into `MDNSEvent`s for the query's
/// receiver, and reconfirmation by restarting the question's browsers.
extension AvahiBackend {
    // MARK: Records (poll lock held, poll thread)

    func recordEvent(
        _ query: AvahiQuery,
        browser: OpaquePointer?,
        event: AvahiBrowserEvent,
        name: UnsafePointer<CChar>?,
        rrClass: UInt16,
        type: UInt16,
        rdata: UnsafeRawPointer?,
        size: Int
    ) {
        guard !query.isCancelled, let browser, query.browser == browser else { return }
        switch event {
        case AVAHI_BROWSER_NEW, AVAHI_BROWSER_REMOVE:
            guard let name, var recordName = AvahiName.unescape(cString: name) else {
                self.logger.debug("mDNS record with an unreadable name", metadata: ["mdns.query": "\(query.id)"])
                return
            }
            // Nearly always the question's own name: share its storage rather than keep a
            // copy per record (exact bytes, so that the responder's spelling is kept).
            if recordName.wireBytes == query.question.name.wireBytes { recordName = query.question.name }
            let bytes: [UInt8] =
                if let rdata, size > 0 { Array(UnsafeRawBufferPointer(start: rdata, count: size)) } else { [] }
            let record = MDNSRecord(
                name: recordName,
                type: RRType(rawValue: type),
                rrClass: RRClass(rawValue: rrClass & 0x7FFF),
                rdata: bytes
            )
            // One event per delivery: the holder counts (see `MDNSEvent`).
            self.emit(event == AVAHI_BROWSER_NEW ? .added(record) : .removed(record), to: query)
        case AVAHI_BROWSER_ALL_FOR_NOW:
            self.emit(.allForNow, to: query)
        case AVAHI_BROWSER_FAILURE:
            let error = avahi_client_errno(avahi_record_browser_get_client(browser))
            query.browser = nil
            query.failedSinceStart = true
            self.emit(.failed(Self.errorText(error)), to: query)
            if let slot = query.slot {
                // Freeing it is a D-Bus call: the worker's, unless the connection goes first.
                slot.failedBrowsers.append(browser)
                self.worker.submit(.internal) { [weak self, slot] in self?.freeFailedBrowser(browser, of: slot) }
                if !query.isCancelled {
                    slot.life.retryAttach(now: .now)
                    self.reschedule(slot)
                }
            } else {
                avahi_record_browser_free(browser)
            }
        default:
            break  // CACHE_EXHAUSTED
        }
    }

    func freeFailedBrowser(_ browser: OpaquePointer, of slot: AvahiClientSlot) {
        guard let index = slot.failedBrowsers.firstIndex(of: browser) else { return }  // freed with its connection
        slot.failedBrowsers.remove(at: index)
        self.call("free a failed record browser", on: slot) { _ = avahi_record_browser_free(browser) }
    }

    func emit(_ event: MDNSEvent, to query: AvahiQuery) {
        guard !query.isCancelled else { return }
        self.logger.debug(
            "mDNS event",
            metadata: [
                "mdns.query": "\(query.id)", "mdns.name": "\(query.question.name)",
                "mdns.interface": "\(query.question.interface)", "mdns.event": "\(event)",
            ]
        )
        query.receiver?.receive(event, for: query.question, tag: query.tag)
    }

    // MARK: Reconfirm

    /// avahi-client has no reconfirm call (avahi-core's cache reconfirmation is not exposed
    /// over D-Bus), so this re-queries instead: the question's record browsers are restarted,
    /// which makes the daemon send a fresh query and deliver its cache again. Each query gets
    /// `.verifying` first; its holder drops the records not delivered again by "all for now".
    /// Records the daemon still caches stay until their mDNS TTL runs out.
    /// Queued for the worker like a new query; a reconfirmation that finds the queue full is
    /// dropped (the record goes at its TTL).
    public func reconfirm(_ question: MDNSQuestion, record: MDNSRecord) {
        let queued = self.worker.submit(.request) { [weak self] in self?.restartBrowsers(of: question) }
        if !queued {
            self.logger.debug("mDNS reconfirm dropped: the queue is full", metadata: ["mdns.question": "\(question)"])
        }
    }

    /// A job: the worker holds the poll lock.
    private func restartBrowsers(of question: MDNSQuestion) {
        let restarted = { () -> Int in
            guard !self.isShutDown else { return 0 }
            var count = 0
            for slot in self.slots {
                guard slot.client != nil, !slot.tornDown else { continue }
                for query in slot.queries where query.question == question && !query.isCancelled {
                    guard let browser = query.browser else { continue }
                    query.browser = nil
                    self.call("free a record browser", on: slot) { _ = avahi_record_browser_free(browser) }
                    self.emit(.verifying, to: query)
                    if slot.tornDown {
                        query.verifyOnAttach = false  // told already; re-created with the connection
                        continue
                    }
                    let error = self.createBrowser(query, slot: slot)
                    if slot.tornDown { continue }  // it stalled: made again with the connection
                    if error != AVAHI_OK {
                        // As for a browser failure: report it, and the slot re-attaches it.
                        query.failedSinceStart = true
                        self.emit(.failed("cannot restart the record browser"), to: query)
                        slot.life.retryAttach(now: .now)
                        self.reschedule(slot)
                    }
                    count += 1
                }
            }
            return count
        }()
        self.logger.debug(
            "mDNS reconfirm: record browsers restarted",
            metadata: ["mdns.question": "\(question)", "mdns.restarted": "\(restarted)"])
    }
}
