import CTLSIdentity
import DNSWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
            try files.createDirectory(
                atPath: settings.stateDirectory, withIntermediateDirectories: true,
                attributes: [.posixPermissions: 0o700])
        } catch {
            throw StartupError(
                "cannot create the state directory \(settings.stateDirectory): \(SystemText.reason(error))")
        }
        let (certificatePEM, keyPEM) = try selfSigned(serverName: serverName)
        // The key first and private, so a crash never leaves a certificate without its key.
        guard
            files.createFile(
                atPath: privateKeyFile, contents: Data(keyPEM.utf8), attributes: [.posixPermissions: 0o600]),
            files.createFile(
                atPath: certificateFile, contents: Data(certificatePEM.utf8), attributes: [.posixPermissions: 0o644])
        else {
            throw StartupError("cannot write the TLS certificate and key in \(settings.stateDirectory)")
        }
        return TLSIdentity(
            certificateFile: certificateFile, privateKeyFile: privateKeyFile,
            fingerprint: try fingerprint(ofPEM: certificatePEM, file: certificateFile), generated: true)
    }

    /// An ECDSA P-256 key (PKCS #8 PEM) and a self-signed certificate for the server name,
    /// valid for 10 years (CTLSIdentity, on the system's libcrypto).
    static func selfSigned(serverName: DNSName) throws -> (certificate: String, key: String) {
        let text = "\(serverName)"
        let host = text.hasSuffix(".") ? String(text.dropLast()) : text
        var certificate: UnsafeMutablePointer<CChar>?
        var key: UnsafeMutablePointer<CChar>?
        var error = [CChar](repeating: 0, count: 256)
        let made = dp_tls_self_signed(
            host.isEmpty ? "discovery-proxy" : host, 3650, &certificate, &key, &error, error.count)
        defer {
            free(certificate)
            free(key)
        }
        guard made == 0, let certificate, let key else {
            let reason = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw StartupError("cannot make a self-signed TLS certificate: \(reason)")
        }
        return (String(cString: certificate), String(cString: key))
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
        var digest = [UInt8](repeating: 0, count: 32)
        guard der.withUnsafeBytes({ dp_tls_sha256($0.bindMemory(to: UInt8.self).baseAddress, $0.count, &digest) }) == 0
        else {
            throw StartupError("cannot hash the certificate in \(file)")
        }
        return digest.map(SystemText.hex).joined(separator: ":")
    }
}
