import Crypto
import DNSWire
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SwiftASN1
import X509

/// The certificate and key the DNS Push TLS listener presents.
struct TLSIdentity: Sendable {
    var certificateFile: String
    var privateKeyFile: String
    /// SHA-256 of the leaf certificate's DER, as hex pairs joined by colons (what
    /// `openssl x509 -fingerprint -sha256` prints), for pinning by clients.
    var fingerprint: String
    /// Made at this start (false: given by the operator or kept from an earlier start).
    var generated: Bool

    static let certificateName = "push-tls-cert.pem"
    static let keyName = "push-tls-key.pem"

    /// The operator's files when configured; otherwise the self-signed pair kept in
    /// `stateDirectory`, made on first use (ECDSA P-256, 10 years, SAN = the server name).
    static func load(settings: PushSettings, serverName: DNSName) throws -> TLSIdentity {
        if let certificateFile = settings.certificateFile, let privateKeyFile = settings.privateKeyFile {
            return TLSIdentity(
                certificateFile: certificateFile, privateKeyFile: privateKeyFile,
                fingerprint: try fingerprint(ofPEMFile: certificateFile), generated: false)
        }
        let directory = URL(fileURLWithPath: settings.stateDirectory)
        let certificateFile = directory.appendingPathComponent(certificateName).path
        let privateKeyFile = directory.appendingPathComponent(keyName).path
        let files = FileManager.default
        if files.fileExists(atPath: certificateFile), files.fileExists(atPath: privateKeyFile) {
            return TLSIdentity(
                certificateFile: certificateFile, privateKeyFile: privateKeyFile,
                fingerprint: try fingerprint(ofPEMFile: certificateFile), generated: false)
        }
        do {
            try files.createDirectory(atPath: settings.stateDirectory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        } catch {
            throw StartupError("cannot create the state directory \(settings.stateDirectory): \(SystemText.reason(error))")
        }
        let (certificatePEM, keyPEM) = try selfSigned(serverName: serverName)
        // The key first and private, so a crash never leaves a certificate without its key.
        guard files.createFile(atPath: privateKeyFile, contents: Data(keyPEM.utf8), attributes: [.posixPermissions: 0o600]),
            files.createFile(atPath: certificateFile, contents: Data(certificatePEM.utf8), attributes: [.posixPermissions: 0o644])
        else {
            throw StartupError("cannot write the TLS certificate and key in \(settings.stateDirectory)")
        }
        return TLSIdentity(
            certificateFile: certificateFile, privateKeyFile: privateKeyFile,
            fingerprint: try fingerprint(ofPEM: certificatePEM, file: certificateFile), generated: true)
    }

    static func selfSigned(serverName: DNSName, now: Date = Date()) throws -> (certificate: String, key: String) {
        let host = "\(serverName)".hasSuffix(".") ? String("\(serverName)".dropLast()) : "\(serverName)"
        do {
            let key = P256.Signing.PrivateKey()
            let name = try DistinguishedName { CommonName(host.isEmpty ? "discovery-proxy" : host) }
            let certificate = try Certificate(
                version: .v3,
                serialNumber: Certificate.SerialNumber(),
                publicKey: Certificate.PublicKey(key.publicKey),
                notValidBefore: now - 3600,
                notValidAfter: now + 10 * 365 * 86400,
                issuer: name,
                subject: name,
                signatureAlgorithm: .ecdsaWithSHA256,
                extensions: try Certificate.Extensions {
                    Critical(BasicConstraints.notCertificateAuthority)
                    SubjectAlternativeNames([.dnsName(host)])
                    try ExtendedKeyUsage([.serverAuth])
                },
                issuerPrivateKey: Certificate.PrivateKey(key))
            return (try certificate.serializeAsPEM().pemString, key.pemRepresentation)
        } catch {
            throw StartupError("cannot make a self-signed TLS certificate: \(error)")
        }
    }

    static func fingerprint(ofPEMFile path: String) throws -> String {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw StartupError("cannot read the TLS certificate \(path): \(SystemText.reason(error))")
        }
        return try fingerprint(ofPEM: text, file: path)
    }

    /// The first certificate of a PEM text.
    static func fingerprint(ofPEM text: String, file: String) throws -> String {
        let lines = text.split(whereSeparator: \.isNewline).map { $0.trimmed() }
        guard let begin = lines.firstIndex(of: "-----BEGIN CERTIFICATE-----"),
            let end = lines[begin...].firstIndex(of: "-----END CERTIFICATE-----"),
            let der = Data(base64Encoded: lines[(begin + 1)..<end].joined())
        else {
            throw StartupError("no PEM certificate in \(file)")
        }
        return SHA256.hash(data: der).map(SystemText.hex).joined(separator: ":")
    }
}
