// The DNS Push listener's self-signed identity, made with the system's OpenSSL libcrypto
// (Debian libssl-dev), which libldns loads anyway: the proxy needs no second TLS library of
// its own for it (swift-nio-ssl's BoringSSL serves the connections). Only ProxyApp calls this.
#ifndef CTLSIDENTITY_H
#define CTLSIDENTITY_H

#include <stddef.h>

// An ECDSA P-256 key and a self-signed X.509 v3 certificate for `host`: CN and
// subjectAltName DNS `host`, CA:FALSE (critical), extendedKeyUsage serverAuth, a random
// 64-bit serial, valid from an hour ago for `days` days, signed with SHA-256.
// On success returns 0 and sets *certificate_pem and *key_pem (PKCS #8) to strings the caller
// frees with free(). On failure returns -1 and writes OpenSSL's reason into `error`.
int dp_tls_self_signed(const char *host, int days, char **certificate_pem, char **key_pem,
                       char *error, size_t error_size);

// SHA-256 of `length` bytes at `data` into `digest` (32 bytes). Returns 0, or -1.
int dp_tls_sha256(const unsigned char *data, size_t length, unsigned char digest[32]);

#endif
