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

/// Calls `callback` whenever `fd` is readable, on the poll's thread.
static inline AvahiWatch *cavahi_watch_new(const AvahiPoll *poll, int fd, AvahiWatchCallback callback, void *userdata) {
    return poll->watch_new(poll, fd, AVAHI_WATCH_IN, callback, userdata);
}

static inline void cavahi_watch_free(const AvahiPoll *poll, AvahiWatch *watch) {
    poll->watch_free(watch);
}
// An AvahiPoll that is another one (the threaded poll's) except that it notes the file
// descriptor of every watch it is asked for: what avahi-client asks for, through libdbus, is
// its D-Bus connection's socket. AvahiWorker shuts that socket down to end a call that has
// waited past its deadline (libdbus offers no shorter timeout than 25 s, nor a way to cancel).
typedef struct {
    AvahiPoll api;  // first: avahi-client is given &api
    const AvahiPoll *inner;
    int socket;  // the last watch's descriptor, -1 before any; read and written atomically
} CAvahiRecordingPoll;

static inline AvahiWatch *cavahi_recording_watch_new(
    const AvahiPoll *api, int fd, AvahiWatchEvent event, AvahiWatchCallback callback, void *userdata) {
    CAvahiRecordingPoll *self = (CAvahiRecordingPoll *)api;
    __atomic_store_n(&self->socket, fd, __ATOMIC_RELEASE);
    return self->inner->watch_new(self->inner, fd, event, callback, userdata);
}

/// Everything but watch_new is the inner poll's, with its userdata (which its functions read).
static inline void cavahi_recording_poll_init(CAvahiRecordingPoll *self, const AvahiPoll *inner) {
    self->api = *inner;
    self->api.watch_new = cavahi_recording_watch_new;
    self->inner = inner;
    self->socket = -1;
}

static inline const AvahiPoll *cavahi_recording_poll_api(CAvahiRecordingPoll *self) { return &self->api; }

static inline int cavahi_recording_poll_socket(CAvahiRecordingPoll *self) {
    return __atomic_load_n(&self->socket, __ATOMIC_ACQUIRE);
}

static inline void cavahi_recording_poll_forget(CAvahiRecordingPoll *self) {
    __atomic_store_n(&self->socket, -1, __ATOMIC_RELEASE);
}
#endif
