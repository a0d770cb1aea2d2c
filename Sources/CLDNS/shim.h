// libldns (NLnet Labs), Debian package libldns-dev. Only DNSWire imports this module.
#ifndef CLDNS_SHIM_H
#define CLDNS_SHIM_H
// ldns/common.h falls back to `#define _Bool signed char` unless stdbool.h came first; the
// library itself is built with C99 bool, so include it here to get Swift `Bool` and the real ABI.
#include <stdbool.h>
#include <ldns/ldns.h>
#endif
