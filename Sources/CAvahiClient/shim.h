// libavahi-client, Debian package libavahi-client-dev. Only the MDNS module imports this.
#ifndef CAVAHI_CLIENT_SHIM_H
#define CAVAHI_CLIENT_SHIM_H
#include <avahi-client/client.h>
#include <avahi-client/lookup.h>
#include <avahi-client/publish.h>
#include <avahi-common/thread-watch.h>
#include <avahi-common/error.h>
#include <avahi-common/malloc.h>
#include <avahi-common/defs.h>
#include <avahi-common/timeval.h>
#include <avahi-common/watch.h>
#include <net/if.h>
#include <stddef.h>

// AvahiPoll's timeout functions are function pointers in a struct; these wrappers keep the
// Swift side free of struct-member calls. All of them need the threaded poll's lock (or must
// run on the poll thread, inside a callback).

/// A disarmed timeout; arm it with cavahi_timeout_arm.
static inline AvahiTimeout *cavahi_timeout_new(const AvahiPoll *poll, AvahiTimeoutCallback callback, void *userdata) {
    return poll->timeout_new(poll, NULL, callback, userdata);
}

/// Fires `ms` milliseconds from now (0: on the next poll iteration).
static inline void cavahi_timeout_arm(const AvahiPoll *poll, AvahiTimeout *timeout, unsigned ms) {
    struct timeval tv;
    poll->timeout_update(timeout, avahi_elapse_time(&tv, ms, 0));
}

static inline void cavahi_timeout_disarm(const AvahiPoll *poll, AvahiTimeout *timeout) {
    poll->timeout_update(timeout, NULL);
}

/// Safe inside the timeout's own callback (avahi defers the cleanup).
static inline void cavahi_timeout_free(const AvahiPoll *poll, AvahiTimeout *timeout) {
    poll->timeout_free(timeout);
}
#endif
