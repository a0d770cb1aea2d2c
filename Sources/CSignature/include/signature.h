// ECDSA P-256 verification for SIG(0) (RFC 2931, RFC 6605), with the system's OpenSSL libcrypto
// (Debian libssl-dev), which libldns loads anyway. Only DNSWire calls this.
#ifndef CSIGNATURE_H
#define CSIGNATURE_H

#include <stddef.h>

// Verifies `signature` (r then s, 32 octets each, as RFC 6605 §4 puts it in DNS) over the
// SHA-256 digest of `length` octets at `data`, with the public key `key` (x then y, 32 octets
// each: the KEY or DNSKEY RDATA's public key field for algorithm 13). Returns 1 when the
// signature is valid, 0 when it is not, -1 when the key is not a point on P-256.
int dp_p256_verify(const unsigned char key[64], const unsigned char *data, size_t length,
                   const unsigned char signature[64]);

#endif
