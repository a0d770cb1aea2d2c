"""pytest fixtures: one namespace lab (and one proxy) for the whole session."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import lab as labmod  # noqa: E402

_LAB = None


def pytest_sessionstart(session):
    if os.geteuid() != 0:
        raise pytest.UsageError("the integration suite needs root (network namespaces)")


@pytest.fixture(scope="session")
def lab():
    global _LAB
    lab = labmod.Lab()
    lab.start(with_proxy=False)
    _LAB = lab
    try:
        try:
            lab.start_proxy()
        except Exception:
            lab.dump_logs(["proxy"])
            raise
        yield lab
    finally:
        if os.environ.get("DPT_DUMP_PROXY_LOG"):
            lab.dump_logs(["proxy"], tail=100000)
        _LAB = None
        lab.stop()


@pytest.fixture(scope="module")
def rlab(lab):
    """The resolver lab (resolver_lab.py): a client namespace, the parent zones on knotd and
    a proxy instance on port 53, for the tests that go through real recursive resolvers."""
    import resolver_lab

    rl = resolver_lab.ResolverLab(lab)
    rl.start()
    try:
        yield rl
    finally:
        rl.stop()


@pytest.fixture(autouse=True)
def _proxy_alive(request):
    """Fail a test whose proxy died, and restart it for the next tests."""
    if "lab" not in request.fixturenames:
        yield
        return
    lab = request.getfixturevalue("lab")
    if lab.proxy is None or lab.proxy.poll() is not None:
        lab.stop_proxy()
        lab.start_proxy()
    yield
    if lab.proxy is not None and lab.proxy.poll() is not None:
        code = lab.proxy.returncode
        log = lab.log_text("proxy", 80)
        lab.stop_proxy()
        pytest.fail("the proxy exited (code %s) during this test; log tail:\n%s" % (code, log))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" and rep.failed and _LAB is not None:
        rep.sections.append(("proxy log (tail)", _LAB.log_text("proxy", 60)))
