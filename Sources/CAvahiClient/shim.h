// libavahi-client, Debian package libavahi-client-dev. Only the MDNS module imports this.
#ifndef CAVAHI_CLIENT_SHIM_H
#define CAVAHI_CLIENT_SHIM_H
#include <avahi-client/client.h>
#include <avahi-client/lookup.h>
#include <avahi-common/thread-watch.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/defs.h>
#include <net/if.h>
#endif
