#!/usr/bin/env bash
# A link conditioner for mDNS (docs/SLOW-LINKS.md): delay, jitter, loss and late answers on
# one interface, by profile name. Needs root, iptables and libnetfilter-queue1.
#
#   sudo scripts/link-conditioner.sh --interface eth1 --profile wifi-busy      # until Ctrl-C
#   sudo scripts/link-conditioner.sh --netns dpt-r --interface dpr-l1 --profile sleepy
#
# Profiles: perfect, wifi-good, wifi-busy, sleepy, lossy (--help lists them).
exec /usr/bin/python3 "$(dirname "$0")/../Tests/integration/conditioner.py" "$@"
