import DNSWire
import Synchronization

/// The link inventory: every `inventoryInterval` the proxy asks, on each link, for the
/// service types (`_services._dns-sd._udp`, RFC 6763 §9) and then for each type's instances,
/// as internal queries through `lookup` (`Asker.proxy`). They share browses, cache,
/// per-link mDNS rate limit and browse limit with clients' queries, and keep those browses
/// alive, so the status page shows what is on each link, not only what clients asked. At
/// most `inventoryMaxTypes` types per link, and none while the browse table is half full.
extension DiscoveryProxy {
    /// The first round, soon after start (or after a reload turns the inventory on).
    func scheduleFirstInventory() {
        if let interval = configuration.inventoryInterval { scheduleInventory(after: min(.seconds(10), interval)) }
    }

    /// The next round; every round schedules the one after it.
    func scheduleInventory(after delay: Duration) {
        guard configuration.inventoryInterval != nil else { return }
        let timer = scheduler.schedule(after: delay) { [weak self] in
            guard let self else { return }
            self.takeInventory()
            if let interval = self.configuration.inventoryInterval { self.scheduleInventory(after: interval) }
        }
        // One chain of rounds: a reload that turns the inventory back on replaces a round
        // still pending from before it was turned off.
        hold(timer) { state, timer in
            state.inventoryTimer?.cancel()
            state.inventoryTimer = timer
        }
    }

    /// One round on every link.
    func takeInventory() {
        let catalog = self.catalog
        let configuration = catalog.configuration
        guard configuration.inventoryInterval != nil else { return }
        for link in configuration.links {
            guard let services = try? DNSName(labels: Catalog.servicesLabels + link.zone.labels) else { continue }
            ask(services, on: link, catalog: catalog) { [weak self] answer in
                self?.browseTypes(in: answer, on: link, catalog: catalog)
            }
        }
    }

    private func browseTypes(in enumeration: Message, on link: Link, catalog: Catalog) {
        let configuration = catalog.configuration
        guard enumeration.rcode == .noError else { return }  // keep the last round's list
        // Each service type as text (`_ipp._tcp`) and as the name to browse.
        var types: [(text: String, name: DNSName)] = []
        for record in enumeration.answers {
            guard case .ptr(let target) = record.rdata, let relative = target.labels(before: link.zone),
                relative.count == 2
            else { continue }
            let text = relative.map { String(decoding: $0, as: UTF8.self) }.joined(separator: ".")
            if !types.contains(where: { $0.text == text }) { types.append((text, target)) }
        }
        types.sort { $0.text.lowercased() < $1.text.lowercased() }
        let room = state.withLock { $0.table.browses.count } < configuration.maxBrowses / 2
        let browsed = room ? Array(types.prefix(configuration.inventoryMaxTypes)) : []
        let interval = (configuration.inventoryInterval ?? .zero) / .seconds(1)
        let round = InventoryRound(types: browsed.map(\.text), omitted: types.count - browsed.count) {
            [weak self] inventory in
            guard let self else { return }
            let now = self.scheduler.now()
            var inventory = inventory
            inventory.intervalSeconds = interval
            self.state.withLock { $0.inventory[link.interface] = (inventory, now) }
        }
        for type in browsed {
            ask(type.name, on: link, catalog: catalog) { answer in round.counted(type.text, answer: answer) }
        }
    }

    /// An internal PTR query of `name`, answered to `done` as a message (never sent, never
    /// counted as a client's query).
    private func ask(_ name: DNSName, on link: Link, catalog: Catalog, done: @escaping @Sendable (Message) -> Void) {
        guard case .mdns(let plan) = catalog.plan(Question(name: name, type: .ptr)) else {
            done(Message(isResponse: true, questions: [Question(name: name, type: .ptr)]))
            return
        }
        let context = QueryContext(
            started: scheduler.now(), epoch: currentEpoch, replayLifetime: .zero, qtype: "PTR", limit: 65535,
            asker: .proxy(done))
        lookup(
            plan, query: Message(id: 0, questions: [Question(name: name, type: .ptr)]), context: context,
            configuration: catalog.configuration)
    }
}
