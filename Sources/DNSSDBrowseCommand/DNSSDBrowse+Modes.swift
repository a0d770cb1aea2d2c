import DNSSDClient
import DNSWire

/// The four things dnssd-browse does, one function each (`DNSSDBrowse.execute` picks one).
extension DNSSDBrowse {
    /// One instance: host, port, addresses and TXT (like dns-sd -L), from the first browse
    /// domain that has it.
    func resolve(instance: [UInt8], type: [[UInt8]], in session: Session) throws(DNSSDError) {
        var lastError: DNSSDError?
        for domain in try session.browseDomains() {
            do {
                let service = try session.client.resolve(instance: instance, type: type, domain: domain)
                Console.out(
                    self.json
                        ? Output.resolveJSON(service, server: session.serverText)
                        : Output.resolveText(service, server: session.serverText))
                return
            } catch {
                guard case .instanceNotFound = error else { throw error }
                lastError = error
            }
        }
        throw lastError!
    }

    /// The instances of a service type (like dns-sd -B); with --watch, changes as they come.
    func browse(type: [[UInt8]], in session: Session) throws(DNSSDError) {
        let domains = try session.browseDomains()
        let poll = { () throws(DNSSDError) -> [ServiceInstance] in
            var all: [ServiceInstance] = []
            for domain in domains { all += try session.client.browse(type: type, domain: domain) }
            return all
        }
        if self.watch {
            Console.out(
                Output.browseTitle(type: type, domains: domains, server: session.serverText) + "\n", unless: self.json)
            Console.out(Output.instanceHeader(watch: true) + "\n", unless: self.json)
            if self.watchWithPush(client: session.client, type: type, domains: domains) { return }
            try self.watchLoop { () throws(DNSSDError) in
                let instances = try poll()
                return (instances.map(Output.instanceRow), instances.map(\.ttl).min())
            }
        } else {
            let instances = try poll()
            Console.out(
                self.json
                    ? Output.browseJSON(instances, type: type, domains: domains, server: session.serverText)
                    : Output.browseText(instances, type: type, domains: domains, server: session.serverText))
        }
    }

    /// The service types of the browse domains (_services._dns-sd._udp).
    func listTypes(in session: Session) throws(DNSSDError) {
        let domains = try session.browseDomains()
        let poll = { () throws(DNSSDError) -> [ServiceTypeEntry] in
            var all: [ServiceTypeEntry] = []
            for domain in domains { all += try session.client.serviceTypes(domain: domain) }
            return all
        }
        if self.watch {
            Console.out(Output.typeHeader(watch: true) + "\n", unless: self.json)
            try self.watchLoop { () throws(DNSSDError) in
                let types = try poll()
                return (types.map(Output.typeRow), types.map(\.ttl).min())
            }
        } else {
            let types = try poll()
            Console.out(
                self.json
                    ? Output.typesJSON(types, domains: domains, server: session.serverText)
                    : Output.typesText(types, domains: domains, server: session.serverText))
        }
    }

    /// The browse domains (b/db/lb._dns-sd._udp) under DOMAIN or the search domains.
    func listDomains(in session: Session) throws(DNSSDError) {
        let searched = session.explicitDomain.map { [$0] } ?? session.searchDomains
        guard !searched.isEmpty else { throw .noBrowseDomains(searched: [], server: session.serverText) }
        let poll = { () throws(DNSSDError) -> [BrowseDomain] in
            if let explicitDomain = session.explicitDomain {
                return try session.client.browseDomains(in: explicitDomain)
            }
            var all: [BrowseDomain] = []
            for search in searched {
                let found: [BrowseDomain]
                do throws(DNSSDError) {
                    found = try session.client.browseDomains(in: search)
                } catch {
                    // Search domains are only hints: one the server does not serve is skipped.
                    switch error {
                    case .refused, .serverFailure, .errorRCode: continue
                    default: throw error
                    }
                }
                all += found.filter { entry in !all.contains { $0.domain == entry.domain } }
            }
            return all
        }
        if self.watch {
            Console.out(Output.domainHeader(watch: true) + "\n", unless: self.json)
            try self.watchLoop { () throws(DNSSDError) in
                let found = try poll()
                return (found.map(Output.domainRow), found.map(\.ttl).min())
            }
        } else {
            let found = try poll()
            if found.isEmpty && session.explicitDomain == nil {
                throw .noBrowseDomains(searched: searched.map(ServiceNames.display), server: session.serverText)
            }
            Console.out(
                self.json
                    ? Output.domainsJSON(found, searched: searched, server: session.serverText)
                    : Output.domainsText(found, searched: searched, server: session.serverText))
        }
    }
}
