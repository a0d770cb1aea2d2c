"""The Debian package (debian/, built by scripts/test.sh with dpkg-buildpackage): installed
with apt-get as a user would (Depends resolved by apt), its files where Debian puts them, the
installed binary serving the lab (as the package's system user), its size within
issue 28's targets, and purged again without a trace. Runs only when DISCOVERY_PROXY_DEB
names the built .deb."""

import os
import pwd
import shlex
import subprocess

import dns.rdatatype as T
import pytest

import lab as L
from helpers import browse_until, name, query

DEB = os.environ.get("DISCOVERY_PROXY_DEB")
pytestmark = pytest.mark.skipif(not DEB, reason="no package built (DISCOVERY_PROXY_DEB unset)")
PORT = 5311
APT_ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")


def _run(*cmd, check=True):
    return subprocess.run(cmd, capture_output=True, text=True, check=check, env=APT_ENV, timeout=600)


@pytest.fixture(scope="module")
def installed():
    _run("apt-get", "install", "-y", "-q", "--no-install-recommends", os.path.abspath(DEB))
    yield
    _run("apt-get", "purge", "-y", "-q", "discovery-proxy", check=False)


def test_files_where_debian_puts_them(installed):
    p = _run("/usr/sbin/discovery-proxy", "--version")
    assert p.stdout.startswith("discovery-proxy 0.1.0 (git "), p.stdout
    assert _run("/usr/bin/dnssd-browse", "--version").stdout.startswith("dnssd-browse 0.1.0")
    conffiles = _run("dpkg-query", "-W", "-f=${Conffiles}", "discovery-proxy").stdout
    assert "/etc/discovery-proxy/discovery-proxy.yaml" in conffiles
    for page in ("discovery-proxy", "dnssd-browse", "discovery-proxy.yaml"):
        assert _run("man", "-w", page).stdout.strip().startswith("/usr/share/man/")
    unit = open("/lib/systemd/system/discovery-proxy.service").read()
    assert "ExecStart=/usr/sbin/discovery-proxy --config /etc/discovery-proxy/discovery-proxy.yaml" in unit
    assert "User=discovery-proxy" in unit and "DynamicUser" not in unit.split("[Service]")[1].split("\n# ")[0]
    user = pwd.getpwnam("discovery-proxy")
    assert user.pw_shell == "/usr/sbin/nologin" and user.pw_uid < 1000, "a system user"
    # The shipped configuration is valid as a file; it needs a link before it can run.
    check = _run("/usr/sbin/discovery-proxy", "--config", "/etc/discovery-proxy/discovery-proxy.yaml",
                 "--check-config", check=False)
    assert check.returncode == 0, check.stderr
    assert "# warning: links: no link configured" in check.stdout
    assert "libswiftCore" not in _run("ldd", "/usr/sbin/discovery-proxy").stdout, "the Swift runtime is linked in"


def test_installed_binary_serves_the_lab(lab, installed):
    """The packaged binary, run as the package's system user (it binds, then drops to it),
    answers the apex and browses link 1."""
    lab.start_proxy(["--user", "discovery-proxy"], name="packaged", port=PORT, v6=False,
                    binary="/usr/sbin/discovery-proxy", log_level="info")
    try:
        r, _ = query(L.ZONE1, T.SOA, port=PORT)
        assert r.rcode() == 0 and r.answer
        browse_until(name("_ipp", "_tcp"), [name("Printer One", "_ipp", "_tcp")], port=PORT)
        pid = lab.procs["packaged"].pid
        uid = int(open("/proc/%d/status" % pid).read().split("Uid:")[1].split()[0])
        assert uid == pwd.getpwnam("discovery-proxy").pw_uid
    finally:
        lab.stop_proc("packaged")


def _build_options():
    """DEB_BUILD_OPTIONS when the package was built: the .buildinfo beside the .deb records
    the build's environment."""
    info = DEB[:-len(".deb")] + ".buildinfo"
    if os.path.exists(info):
        for line in open(info):
            if line.startswith(" DEB_BUILD_OPTIONS="):
                return shlex.split(line.split("=", 1)[1])[0].split()
    return []


def test_package_fits_a_router(installed):
    """Issue 28's size targets, on the package users install (a release build): the .deb at
    most 10 MB, its stripped executable at most 25 MB (docs/BENCHMARKS.md, "Footprint")."""
    if "noopt" in _build_options():
        pytest.skip("a debug (noopt) package is for tests; the size targets are the release package's")
    deb_mb = os.path.getsize(DEB) / 1e6
    exe_mb = os.path.getsize("/usr/sbin/discovery-proxy") / 1e6
    print("package %.2f MB (target <= 10), executable %.2f MB stripped (target <= 25)" % (deb_mb, exe_mb))
    assert deb_mb <= 10, ("the package is %.2f MB, over the 10 MB a router's flash can spare: "
                          "docs/BENCHMARKS.md, \"Footprint\", says where the size goes" % deb_mb)
    assert exe_mb <= 25, ("/usr/sbin/discovery-proxy is %.2f MB stripped, over 25 MB: "
                          "docs/BENCHMARKS.md, \"Footprint\", says where the size goes" % exe_mb)


def test_purge_leaves_nothing(installed):
    _run("apt-get", "purge", "-y", "-q", "discovery-proxy")
    for path in ("/usr/sbin/discovery-proxy", "/usr/bin/dnssd-browse", "/etc/discovery-proxy",
                 "/lib/systemd/system/discovery-proxy.service", "/var/lib/discovery-proxy"):
        assert not os.path.exists(path), path
    with pytest.raises(KeyError):
        pwd.getpwnam("discovery-proxy")
