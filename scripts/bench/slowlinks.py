"""k. slow links (issue 29): the first answer to a cold browse when link 1 is conditioned
like busy Wi-Fi or sleeping devices (Tests/integration/conditioner.py, docs/SLOW-LINKS.md).

Each trial publishes a fresh type with INSTANCES instances on link 1, which the router has
never cached (slowlab.fresh_type), and asks the proxy directly:
- the first answer's share of what `avahi-browse` on the router lists within 5 s (the
  issue's reference, run beside the query: slowlab.avahi_reference);
- the time to that answer;
- whether it reported the type absent;
- when it was incomplete, whether the next query after its TTL is complete.

Three devices (`devices_rows`): a fresh type answered by three devices after 30, 250 and
600 ms (Tests/integration/late_devices.py) on the perfect link, six browses in a row on a
fresh proxy, which learns the link's answer times from the first ones (docs/ARCHITECTURE.md,
"Slow links: learned answer times"). Each profile, too, runs on a proxy of its own.

DNS Push: a subscriber (DSO over the proxy's TCP listener, push.on-tcp) to a fresh type's PTR
waits for an instance published on link 1, then for its withdrawal. The times run from the
responder's command to the PUSH, so they include python-zeroconf's probing and avahi's 1 s
goodbye delay (RFC 6762 §10.1); what the link adds is the figure over the perfect link's.

Through resolvers (`resolver_rows`): the resolver lab (Tests/integration/resolver_lab.py),
one resolver at a time; the client asks once (RD) and waits 5 s as a stub does, then, when
the answer was empty or incomplete, asks again 1.2 s after the TTL it got ran out. wifi-busy and sleepy
only; the smoke run asks Unbound once per profile."""

from __future__ import annotations

import contextlib
import os
import statistics
import time

import dns.name
import dns.rdatatype

import lab
import probes
import resolver_lab as RL
import resolvers
import late_lab
import slowlab
from helpers import ptr_targets
from proxies import SLOW_PORT, Proxy

SECTION = "k. slow links"
PROFILES = ("perfect", "wifi-good", "wifi-busy", "sleepy", "lossy")
INSTANCES = 3
DEVICES_MS = (30, 250, 600)
PUSH_CONFIG = "push:\n  on-tcp: true\n"
PUSH_PORT = SLOW_PORT + 10   # the TLS listener (unused here: push.listen must be set for Push)
# The target for Push adds and removes over the perfect link: the profile's mean delay of an
# announcement crossing the link, plus 100 ms (issue 29).
PUSH_SLACK_MS = {"perfect": 0, "wifi-good": 5, "wifi-busy": 80, "sleepy": 5 + 950, "lossy": 0}


def cold_trial(run_, profile, seed, ask, margin, reference=False):
    """One cold browse of a fresh type on the conditioned link 1. `ask(ptr)` returns (response
    or None, seconds). Returns (share of the instances in the first answer, seconds to it, the
    TTL it carried (None without an answer), the share in the next answer `margin` seconds after that
    TTL ran out, or None when the first was complete, and how many instances avahi-browse on
    the router listed within 5 s, or None). With `reference`, the shares are of what
    avahi-browse listed (the issue's reference; 5 s more per trial)."""
    with slowlab.fresh_type(run_.lab, INSTANCES, prefix="sb") as (stype, instances), \
            slowlab.conditioned(run_.lab, profile, seed=seed):
        return browse_trial(run_, stype, instances, ask, margin, reference)


def browse_trial(run_, stype, instances, ask, margin, reference):
    """`cold_trial`'s browse of `stype`, whose instances are `instances`."""
    ptr = dns.name.from_text("%s._tcp.%s" % (stype, lab.ZONE1))
    with contextlib.ExitStack() as stack:
        avahi = stack.enter_context(slowlab.avahi_reference(run_.lab, stype)) if reference else None
        r, seconds = ask(ptr)
        listed = ptr_targets(r, ptr) & instances if r is not None else set()
        ttl = None if r is None else slowlab.answer_ttl(r, listed)
        second = None
        if listed != instances:
            time.sleep((2 if ttl is None else ttl) + margin)
            again, _ = ask(ptr)
            second = ptr_targets(again, ptr) & instances if again is not None else set()
    want = avahi if avahi else instances
    share = len(listed & want) / len(want)
    return (share, seconds, ttl, None if second is None else len(second & want) / len(want),
            None if avahi is None else len(avahi))


def devices_trial(run_, port, delays_ms):
    """One cold browse of a fresh type whose devices answer after `delays_ms` (a perfect
    link; Tests/integration/late_devices.py). Returns what `cold_trial` does."""
    with late_lab.late_devices(run_.lab, delays_ms, prefix="sd") as (stype, instances):
        return browse_trial(run_, stype, instances, lambda ptr: probes.ask(ptr, dns.rdatatype.PTR, port), 0.2, True)


def devices_rows(run_, port, smoke=False):
    """Three devices of one type answering after 30, 250 and 600 ms: the issue's case of an
    incomplete first answer. The first trials teach the link its answer times."""
    report = run_.report
    trials = 3 if smoke else 6
    results = [devices_trial(run_, port, DEVICES_MS) for _ in range(trials)]
    label = "three devices (%s ms)" % "/".join(str(d) for d in DEVICES_MS)
    for n, (share, seconds, ttl, again, _avahi) in enumerate(results, 1):
        report.row(SECTION, "%s, browse %d: first answer's share" % (label, n), 100.0 * share, "%",
                   note="at %.0f ms, TTL %s s%s" % (
                       1000 * seconds, ttl, "" if again is None else "; next query after it: %.0f%%" % (100 * again)))
    late = results[2:]
    complete = sum(1 for r in late if r[0] == 1.0)
    report.row(SECTION, "%s: first answer complete once learned (browse 3 on)" % label, complete, "of %d" % len(late),
               target="all", ok=complete == len(late))
    cached = [r for r in results if r[0] < 1.0 and (r[2] or 0) > 2]
    report.row(SECTION, "%s: incomplete answers with a TTL over 2 s" % label, len(cached), "of %d" % trials,
               target="0", ok=not cached, note="a resolver would keep an incomplete list that long")
    report.row(SECTION, "%s: avahi-browse on the router, instances listed in 5 s" % label,
               min(r[4] for r in results), "of %d" % len(DEVICES_MS), note="the reference; lowest of %d trials" % trials)
    report.detail("slow-links-devices", results)


def direct_trial(run_, port, profile, seed):
    return cold_trial(run_, profile, seed, lambda ptr: probes.ask(ptr, dns.rdatatype.PTR, port), 0.2, reference=True)


def resolver_trial(run_, rl, profile, seed):
    """Through the running resolver, the client's query as a stub sends it. The next query
    comes 1.2 s after the TTL, not 0.2 s: resolvers keep time in whole seconds (Unbound served
    a TTL-2 negative answer again 2.2 s later, with TTL 0), so an entry can outlive its TTL."""
    def ask(ptr):
        _outcome, seconds, r = resolvers.client_query(rl, ptr.to_text())
        return r, seconds
    return cold_trial(run_, profile, seed, ask, 1.2)


def resolver_rows(run_, smoke=False):
    report = run_.report
    kinds = ("unbound",) if smoke else RL.RESOLVERS
    trials = 1 if smoke else 3
    rl = RL.ResolverLab(run_.lab)
    os.environ.setdefault("DISCOVERY_PROXY_BIN", run_.binary)
    rl.start()
    details = {}
    try:
        resolvers.start_proxy(rl, run_.binary)
        for kind in kinds:
            if not RL.installed(kind):
                report.row(SECTION, "via %s: not installed" % kind, None)
                continue
            rl.start_resolver(kind)
            resolvers.client_query(rl, lab.ZONE1, "SOA")   # the delegation, as a site's resolver knows it
            for profile in ("wifi-busy", "sleepy"):
                results = [resolver_trial(run_, rl, profile, seed) for seed in range(trials)]
                details["%s/%s" % (kind, profile)] = results
                share = 100.0 * statistics.mean(r[0] for r in results)
                absent = sum(1 for r in results if r[0] == 0.0)
                busy = profile == "wifi-busy"
                report.row(SECTION, "via %s, %s: first answer's share" % (kind, profile), share, "%",
                           target=">= 95%" if busy else "", ok=share >= 95.0 if busy else None,
                           note="%d trials; reported absent %d; median %.0f ms" % (
                               trials, absent, 1000 * statistics.median(r[1] for r in results)))
                incomplete = [r for r in results if r[0] < 1.0]
                if incomplete:
                    ttls = [r[2] for r in incomplete if r[2] is not None]
                    complete = sum(1 for r in incomplete if r[3] == 1.0)
                    report.row(SECTION, "via %s, %s: next answer after the TTL complete" % (kind, profile), complete,
                               "of %d" % len(incomplete), target="all" if not busy else "",
                               ok=complete == len(incomplete) if not busy else None,
                               note="TTL the client got: %s s" % (", ".join(str(t) for t in ttls) or "none"))
            rl.stop_resolver()
    finally:
        rl.stop()
    report.detail("slow-links-resolvers", details)


def run(run_, smoke=False):
    """Each profile, and the three devices, on a proxy of its own: a link learns its answer
    times (docs/ARCHITECTURE.md, "Slow links"), and a real link does not change profile."""
    report = run_.report
    trials = 1 if smoke else 8
    profiles = ("perfect", "wifi-busy", "sleepy") if smoke else PROFILES   # CI's smoke run: its time
    state = os.path.join(run_.lab.dir, "proxy-slow-state")

    def proxy():
        return Proxy(run_.lab, run_.binary, SLOW_PORT, "proxy-slow", links=[(lab.R_IF1, lab.ZONE1)],
                     extra_config=PUSH_CONFIG,
                     extra_args=["--push-listen", "%s:%d" % (lab.PROXY_ADDR, PUSH_PORT), "--state-dir", state]).start()

    push_base = None
    for profile in profiles:
        p = proxy()
        try:
            push_base = profile_rows(run_, p.port, profile, trials, smoke, push_base)
        finally:
            p.stop()
    p = proxy()
    try:
        devices_rows(run_, p.port, smoke)
    finally:
        p.stop()
    resolver_rows(run_, smoke)


def profile_rows(run_, port, profile, trials, smoke, push_base):
    """The direct and Push rows of one profile; returns the perfect link's Push medians."""
    report = run_.report
    results = [direct_trial(run_, port, profile, seed) for seed in range(trials)]
    shares = [r[0] for r in results]
    times = sorted(r[1] * 1000.0 for r in results)
    absent = sum(1 for r in results if r[0] == 0.0)
    incomplete = [r for r in results if r[0] < 1.0]
    ttls = [r[2] for r in incomplete if r[2] is not None]
    recovered = sum(1 for r in incomplete if r[3] == 1.0)
    share = 100.0 * statistics.mean(shares)
    busy = profile == "wifi-busy"
    report.row(SECTION, "%s: first answer's share of what avahi-browse lists in 5 s" % profile, share, "%",
               target=">= 95%" if busy else "", ok=share >= 95.0 if busy else None,
               note="%d trials of %d instances, direct; lowest %.0f%%; avahi-browse listed %s" % (
                   trials, INSTANCES, 100 * min(shares), "/".join(str(r[4]) for r in results)))
    report.row(SECTION, "%s: time to the first answer (median)" % profile, statistics.median(times), "ms",
               note="max %.0f ms" % times[-1])
    report.row(SECTION, "%s: a present type reported absent" % profile, absent, "of %d" % trials,
               target="0" if busy else "", ok=absent == 0 if busy else None)
    if incomplete:
        sleepy = profile == "sleepy"
        report.row(SECTION, "%s: incomplete first answers cached at most" % profile, max(ttls or [0]), "s",
                   target="<= 5 s" if sleepy else "", ok=max(ttls or [0]) <= 5 if sleepy else None)
        report.row(SECTION, "%s: next query after that TTL complete" % profile, recovered,
                   "of %d" % len(incomplete), target="all" if sleepy else "",
                   ok=recovered == len(incomplete) if sleepy else None)
    pushes = [slowlab.push_latency(run_.lab, port, profile, seed) for seed in range(1 if smoke else 5)]
    adds = sorted(a for a, _ in pushes if a is not None)
    removes = sorted(r for _, r in pushes if r is not None)
    lost = sum(1 for a, r in pushes if a is None or r is None)
    add_ms = 1000 * statistics.median(adds) if adds else float("nan")
    remove_ms = 1000 * statistics.median(removes) if removes else float("nan")
    if profile == "perfect":
        push_base = (add_ms, remove_ms)
    for what, ms, base in (("add", add_ms, push_base[0]), ("removal", remove_ms, push_base[1])):
        extra = ms - base
        limit = PUSH_SLACK_MS[profile] + 100
        report.row(SECTION, "%s: DNS Push %s (median)" % (profile, what), ms, "ms",
                   target="perfect + %d ms" % limit if profile != "perfect" else "",
                   ok=extra <= limit if profile != "perfect" else None,
                   note="%+.0f ms over the perfect link; %d of %d trials without it in 15 s" % (
                       extra, lost, len(pushes)) if profile != "perfect" else
                   "from the responder's command: zeroconf probes before it announces; avahi acts on a goodbye 1 s later")
    report.detail("slow-links-" + profile, dict(trials=results, push=pushes))
    return push_base
