import DNSWire
import Foundation
import NIOSSL
import Testing

@testable import ProxyApp

@Suite("DNS Push TLS identity: the self-signed pair made with libcrypto")
struct TLSIdentityTests {
    @Test("an ECDSA P-256 key and a certificate for the server name, which swift-nio-ssl loads")
    func selfSigned() throws {
        let (certificatePEM, keyPEM) = try TLSIdentity.selfSigned(serverName: try DNSName("ns.example."))
        #expect(certificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----"))
        #expect(keyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----"), "PKCS #8, as before")
        let certificate = try NIOSSLCertificate(bytes: Array(certificatePEM.utf8), format: .pem)
        _ = try NIOSSLPrivateKey(bytes: Array(keyPEM.utf8), format: .pem)
        #expect(certificate.description.contains("ns.example"))
        let fingerprint = try TLSIdentity.fingerprint(ofPEM: certificatePEM, file: "test")
        #expect(fingerprint.split(separator: ":").count == 32)
        #expect(fingerprint == fingerprint.uppercased())
        let again = try TLSIdentity.selfSigned(serverName: try DNSName("ns.example."))
        #expect(again.certificate != certificatePEM, "a new key and serial each time")
    }

    /// `openssl x509` (Debian's openssl package), when installed, reads what the proxy wrote.
    @Test("openssl agrees: subject, SAN, CA:FALSE critical, serverAuth, ten years, SHA-256 fingerprint")
    func opensslAgrees() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else { return }
        let (certificatePEM, _) = try TLSIdentity.selfSigned(serverName: try DNSName("ns.example."))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("tls-identity-\(getpid()).pem").path
        try certificatePEM.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let text = try run(["x509", "-in", path, "-noout", "-text", "-fingerprint", "-sha256"])
        #expect(text.contains("Subject: CN = ns.example"))
        #expect(text.contains("DNS:ns.example"))
        #expect(text.contains("X509v3 Basic Constraints: critical") && text.contains("CA:FALSE"))
        #expect(text.contains("TLS Web Server Authentication"))
        #expect(text.contains("ecdsa-with-SHA256") && text.contains("prime256v1"))
        #expect(text.contains("Version: 3"))
        let fingerprint = try TLSIdentity.fingerprint(ofPEM: certificatePEM, file: path)
        #expect(text.contains("sha256 Fingerprint=" + fingerprint), "\(text)")
        let years = try run(["x509", "-in", path, "-noout", "-checkend", "\(9 * 365 * 86400)"])
        #expect(years.contains("will not expire"))
    }

    private func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }
}
