// libldns (NLnet Labs), Debian package libldns-dev. Only DNSWire imports this module.
#ifndef CLDNS_SHIM_H
#define CLDNS_SHIM_H
#include <ldns/ldns.h>
#endif
