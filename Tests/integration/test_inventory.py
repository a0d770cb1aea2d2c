"""The link inventory on the status page: with it on, the proxy browses each link's service
types (_services._dns-sd._udp, RFC 6763 §9) and each type's instances by itself, so the page
lists what is on a link before any client asks. Checked in /api/services and in the page as
headless Chromium renders it (its DOM and a screenshot)."""

import os
import re
import shutil
import subprocess
import time

import pytest

import lab as L
from test_admin import _chromium, admin_http, api_services

PORT = 5312
ADMIN = PORT + 3000


@pytest.fixture(scope="module")
def inventory_proxy(lab):
    lab.start_proxy(["--inventory-interval", "10"], name="proxy-inventory", port=PORT, v6=False)
    yield
    lab.stop_proc("proxy-inventory")


def _inventory(interface, want, timeout=40):
    deadline = time.monotonic() + timeout
    while True:
        links = {lk["interface"]: lk for lk in api_services(port=ADMIN)["links"]}
        inventory = links[interface].get("inventory")
        counts = {t["type"]: t["instances"] for t in (inventory or {}).get("types", [])}
        if all(counts.get(t, 0) >= n for t, n in want.items()) or time.monotonic() > deadline:
            return inventory, counts
        time.sleep(1)


def test_inventory_lists_each_links_types_and_counts(lab, inventory_proxy):
    """No client asked anything of this proxy, yet link 1's inventory has _ipp._tcp with
    its instances (avahi's and python-zeroconf's printers) and _http._tcp; link 2's has its
    own printer; and neither lists the other link's types."""
    inventory, counts = _inventory(L.R_IF1, {"_ipp._tcp": 3, "_http._tcp": 1})
    assert inventory is not None, "no inventory within 40 s"
    assert counts.get("_ipp._tcp", 0) >= 3 and counts.get("_http._tcp", 0) >= 1, counts
    assert inventory["intervalSeconds"] == 10
    _inv2, counts2 = _inventory(L.R_IF2, {"_ipp._tcp": 1})
    assert counts2.get("_ipp._tcp") == 1, counts2
    assert "_http._tcp" not in counts2 or counts2["_http._tcp"] is not None
    services = {lk["interface"]: lk["services"] for lk in api_services(port=ADMIN)["links"]}
    assert any(s["instance"] == "Printer One" for s in services[L.R_IF1])
    assert not any(s["instance"] == "Printer One" for s in services[L.R_IF2]), "isolation"


def test_status_page_links_each_type_to_its_instances(lab, inventory_proxy, tmp_path):
    """The page as Chromium renders it: "On this link" with each type linking to the first
    row of its instances below, and a screenshot."""
    _inventory(L.R_IF1, {"_ipp._tcp": 3})
    status, _ctype, body = admin_http("GET", "/", port=ADMIN)
    assert status == 200
    browser = _chromium()
    if browser is None:
        pytest.fail("chromium is not installed (apt-get install -y chromium)")
    home = tmp_path / "home"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"),
               XDG_CACHE_HOME=str(home / ".cache"))
    base = ["ip", "netns", "exec", L.NS_R, browser, "--headless", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check", "--hide-scrollbars",
            "--user-data-dir=%s" % (tmp_path / "profile")]
    url = "http://127.0.0.1:%d/" % ADMIN
    dom = subprocess.run(base + ["--dump-dom", url], capture_output=True, env=env, timeout=90,
                         start_new_session=True).stdout.decode("utf-8", "replace")
    assert "On this link" in dom, dom[:2000]
    assert "The proxy's own inventory" in dom, "the page says where the list comes from"
    targets = re.findall(r'<a href="#(svc-%s-[^"]+)">' % re.escape(L.R_IF1), dom)
    assert "svc-%s-_ipp._tcp" % L.R_IF1 in targets, targets
    for target in targets:
        assert 'id="%s"' % target in dom, "inventory link #%s has no row to land on" % target
    png = tmp_path / "inventory.png"
    subprocess.run(base + ["--screenshot=%s" % png, "--window-size=1280,1400", url], capture_output=True,
                   env=env, timeout=90, start_new_session=True)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, "no usable screenshot"
    keep = os.environ.get("DPT_SCREENSHOT_INVENTORY")
    if keep:
        shutil.copyfile(png, keep)
