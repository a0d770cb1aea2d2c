import DNSWire
import MDNS

/// What the proxy currently knows about one link, derived from its live browses: the
/// read-only view behind the admin status page and `/api/services`.
public struct LinkStatus: Sendable, Codable, Equatable {
    public var interface: String
    /// The zone in presentation format, e.g. `lab1.example.`.
    public var zone: String
    /// Live mDNS queries (avahi record browsers) on this link.
    public var activeBrowses: Int
    public var services: [ServiceStatus]
    /// The proxy's own inventory of the link (`LinkInventory`); nil when it is off or no
    /// round has ended yet.
    public var inventory: LinkInventory?
    /// How long a query on this link waits for mDNS, as learned (`AnswerTimes`).
    public var answerTimes: LinkAnswerTimes

    public init(
        interface: String, zone: String, activeBrowses: Int, services: [ServiceStatus], inventory: LinkInventory? = nil,
        answerTimes: LinkAnswerTimes = LinkAnswerTimes()
    ) {
        self.interface = interface
        self.zone = zone
        self.activeBrowses = activeBrowses
        self.services = services
        self.inventory = inventory
        self.answerTimes = answerTimes
    }
}

/// A link's learned mDNS answer times (`AnswerTimes`), for `/metrics` and the status API.
public struct LinkAnswerTimes: Sendable, Codable, Equatable {
    /// How long a query waits for a first mDNS answer before "nothing there".
    public var negativeTimeoutSeconds: Double
    /// Added to the collection window: the usual time between a browse's first and last answer.
    public var spreadSeconds: Double
    /// Recent browses it was learned from (at most 16).
    public var browses: Int

    public init(negativeTimeoutSeconds: Double = 0.8, spreadSeconds: Double = 0, browses: Int = 0) {
        self.negativeTimeoutSeconds = negativeTimeoutSeconds
        self.spreadSeconds = spreadSeconds
        self.browses = browses
    }
}

/// One service instance as seen through the proxy's cache. Fields stay nil until a client
/// has resolved the instance (the proxy only holds what clients asked for).
public struct ServiceStatus: Sendable, Codable, Equatable {
    /// The service type, e.g. `_ipp._tcp`.
    public var type: String
    /// The instance label as UTF-8 text, e.g. `Drucker Küche` or `Dot.ted Printer`.
    public var instance: String
    /// The target host in the link zone, e.g. `prnt.lab1.example.`.
    public var host: String?
    public var port: Int?
    public var addresses: [String]
    public var txt: [TXTEntry]?
    /// Seconds since the proxy first saw the instance.
    public var ageSeconds: Double

    public init(
        type: String, instance: String, host: String? = nil, port: Int? = nil, addresses: [String] = [],
        txt: [TXTEntry]? = nil, ageSeconds: Double = 0
    ) {
        self.type = type
        self.instance = instance
        self.host = host
        self.port = port
        self.addresses = addresses
        self.txt = txt
        self.ageSeconds = ageSeconds
    }
}

extension LinkStatus {
    static func make(
        links: [Link], browses: [BrowseKey: Browse], inventory: [String: (LinkInventory, at: Duration)] = [:],
        answerTimes: [String: LinkAnswerTimes] = [:], suppressLinkLocal: Bool, now: Duration
    ) -> [LinkStatus] {
        links.map { link in
            let mine = browses.filter { $0.key.interface == link.interface }
            func held(_ name: DNSName, _ type: RRType) -> [CachedRecord] {
                mine[BrowseKey(interface: link.interface, name: name, type: type)]?.orderedRecords ?? []
            }
            /// As answered: RDATA in the link's zone, suppressed addresses left out.
            let answered = ZonePresentation(link: link, suppressLinkLocal: suppressLinkLocal)
            func records(_ name: DNSName, _ type: RRType) -> [RData] {
                held(name, type).compactMap(answered.rewritten)
            }
            var services: [ServiceStatus] = []
            var seen = Set<DNSName>()
            // Every PTR browse of a service type (`_x._tcp.local.`, subtypes included) lists instances.
            for (key, browse) in mine.sorted(by: { "\($0.key.name)" < "\($1.key.name)" })
            where key.type == .ptr && ServiceStatus.isServiceType(key.name) {
                for ptr in browse.orderedRecords {
                    guard let instance = ptr.ptrTarget, seen.insert(instance).inserted,
                        instance.labels.count == 4
                    else { continue }
                    var status = ServiceStatus(
                        type: instance.labels[1...2].map { String(decoding: $0, as: UTF8.self) }.joined(separator: "."),
                        instance: String(decoding: instance.labels[0], as: UTF8.self), host: nil, port: nil,
                        addresses: [], txt: nil, ageSeconds: Double((now - ptr.seenAt).components.seconds))
                    if let srv = held(instance, .srv).first,
                        let localHost = srv.localTarget,
                        case .srv(_, _, let port, let target)? = ZonePresentation(link: link, suppressLinkLocal: false)
                            .rewritten(srv)
                    {
                        status.host = "\(target)"
                        status.port = Int(port)
                        status.addresses = (records(localHost, .a) + records(localHost, .aaaa)).compactMap {
                            switch $0 {
                            case .a(let bytes), .aaaa(let bytes): return IPPrefix.format(bytes)
                            default: return nil
                            }
                        }
                    }
                    if case .txt(let bytes)? = records(instance, .txt).first {
                        status.txt = TXTEntry.parse(bytes)
                    }
                    services.append(status)
                }
            }
            let taken = inventory[link.interface].map { taken in
                var inventory = taken.0
                inventory.ageSeconds = Double(max(.zero, now - taken.at).components.seconds)
                return inventory
            }
            return LinkStatus(
                interface: link.interface, zone: "\(link.zone)", activeBrowses: mine.count, services: services,
                inventory: taken, answerTimes: answerTimes[link.interface] ?? LinkAnswerTimes())
        }
    }
}

extension ServiceStatus {
    /// `_x._tcp.local.` or `_sub`-type `_y._sub._x._tcp.local.`.
    static func isServiceType(_ name: DNSName) -> Bool {
        let labels = name.labels
        guard labels.count >= 3, let proto = labels.dropLast().last else { return false }
        let text = String(decoding: proto, as: UTF8.self).lowercased()
        return (text == "_tcp" || text == "_udp") && labels.first?.first == UInt8(ascii: "_")
            && !(labels.count == 4 && String(decoding: labels[0], as: UTF8.self) == "_services")
    }
}
