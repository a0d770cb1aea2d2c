// dnssd-browse: a unicast DNS-SD client (RFC 6763) in the style of `dns-sd -B` / `dns-sd -L`.
import ArgumentParser
import DNSSDBrowseCommand

DNSSDBrowse.main()
