import DNSWire

/// Private address realms (RFC 8766 §5.5.2): an RFC 1918 or Unique Local (RFC 4193) address
/// reaches its host only from inside the network that routes it. A site with several such
/// networks names them here: a link is in a realm (`Link.realm`), and clients are placed in
/// realms by their address prefixes. A private address of a link's host is then not given to
/// a client known to be in another realm; a client in no realm, or a link in none, sees every
/// address, since the proxy cannot tell (§5.5.2: "in cases where the Discovery Proxy can
/// determine that the querying client is in a different address realm").
public struct PrivateRealms: Hashable, Sendable {
    public struct Realm: Hashable, Sendable {
        public var name: String
        public var clients: [IPPrefix]

        public init(name: String, clients: [IPPrefix]) {
            self.name = name
            self.clients = clients
        }
    }

    public var realms: [Realm]

    public init(_ realms: [Realm] = []) {
        self.realms = realms
    }

    public var isEmpty: Bool { realms.isEmpty }

    /// The realm of the most specific prefix that holds `client`; nil when none does.
    public func realm(of client: [UInt8]) -> String? {
        var best: (name: String, length: Int)?
        for realm in realms {
            for prefix in realm.clients where prefix.contains(client) && prefix.length > (best?.length ?? -1) {
                best = (realm.name, prefix.length)
            }
        }
        return best?.name
    }

    /// Whether the private addresses of `link`'s hosts are withheld from `client`: both are
    /// in a realm, and not the same one.
    public func hidesPrivateAddresses(of link: Link, from client: DNSClient) -> Bool {
        guard let linkRealm = link.realm, let clientRealm = realm(of: client.address) else { return false }
        return clientRealm != linkRealm
    }

    /// 10/8, 172.16/12, 192.168/16 (RFC 1918) and fc00::/7 (RFC 4193).
    public static func isPrivate(_ address: [UInt8]) -> Bool {
        switch address.count {
        case 4:
            return address[0] == 10 || (address[0] == 172 && address[1] & 0xF0 == 16)
                || (address[0] == 192 && address[1] == 168)
        case 16:
            return address[0] & 0xFE == 0xFC
        default:
            return false
        }
    }
}
