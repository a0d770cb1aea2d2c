"""The Grafana dashboard (deploy/grafana/discovery-proxy.json): valid against the schema of
the dashboard model it uses, laid out without overlaps, and every metric and label its
queries use is one the running proxy exports (docs/METRICS.md)."""

import json
import os
import re

import jsonschema

import lab as L
from helpers import browse_until, name, query
from test_admin import scrape

import dns.rdatatype as T

GRAFANA = os.path.join(L.REPO, "deploy", "grafana")


def _dashboard():
    with open(os.path.join(GRAFANA, "discovery-proxy.json"), encoding="utf-8") as f:
        return json.load(f)


def test_dashboard_matches_schema_and_layout():
    with open(os.path.join(GRAFANA, "dashboard.schema.json"), encoding="utf-8") as f:
        schema = json.load(f)
    dash = _dashboard()
    jsonschema.validate(dash, schema)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    cells = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, "panel %r overlaps another" % p["title"]
                cells.add((x, y))
    variables = {v["name"] for v in dash["templating"]["list"]}
    for p in dash["panels"]:
        for t in p["targets"]:
            for used in re.findall(r"\$\{?([A-Za-z_]+)", t["expr"]):
                assert used in variables or used.startswith("__"), (p["title"], used)


# Exported only while their feature is configured (the lab's main proxy runs without Push).
# `dns_rrl_responses_total` is exported at zero with rate limiting off (issue 43).
BY_FEATURE = {"dns_push_sessions": "push", "dns_push_subscriptions": "push", "dns_push_sessions_ended_total": "push"}


def test_dashboard_queries_use_exported_metrics(lab):
    """After ordinary traffic, every metric a panel asks for is in /metrics, with every label
    the panel groups or filters by (metrics of features the lab's proxy runs without are
    checked against docs/METRICS.md instead)."""
    with open(os.path.join(L.REPO, "docs", "METRICS.md"), encoding="utf-8") as f:
        documented = f.read()
    query(L.ZONE1, T.SOA)
    query(L.ZONE1, T.SOA, tcp=True)
    browse_until(name("_ipp", "_tcp"), [name("Printer One", "_ipp", "_tcp")])
    samples, typed = scrape()
    labels = {}
    for (metric, label_set) in samples:
        labels.setdefault(metric, set()).update(k for k, _v in label_set)
    for p in _dashboard()["panels"]:
        for t in p["targets"]:
            expr = t["expr"]
            for metric, selector in re.findall(r"([a-z_]+)\{([^}]*)\}", expr):
                base = re.sub(r"_(bucket|count|sum)$", "", metric)
                if base in BY_FEATURE and base not in typed:
                    assert "`%s`" % base in documented, base
                    continue
                assert base in typed, "%s: %s is not exported" % (p["title"], metric)
                assert metric in labels, "%s: no samples of %s" % (p["title"], metric)
                for label in re.findall(r"([a-z_]+)\s*=~?", selector):
                    if label != "instance":  # added by Prometheus at scrape time
                        assert label in labels[metric], "%s: %s has no label %s" % (p["title"], metric, label)
            for group in re.findall(r"by \(([^)]*)\)", expr):
                for label in (g.strip() for g in group.split(",")):
                    if label in ("le", "instance"):
                        continue
                    used = re.findall(r"([a-z_]+)\{", expr)
                    if all(m in BY_FEATURE and m not in typed for m in used):
                        continue
                    assert any(label in labels.get(m, ()) for m in used), \
                        "%s: nothing to group by %s" % (p["title"], label)
