"""Result rows: each figure with its target, printed as a table and written as JSON."""

from __future__ import annotations

import json


class Report:
    def __init__(self, meta):
        self.meta = dict(meta)
        self.rows = []
        self.details = {}

    def row(self, section, metric, value, unit="", target="", ok=None, note=""):
        """One line of the table; `ok` is True/False against the target, None when the
        row has no target (context figures)."""
        if isinstance(value, float):
            value = float("%.4g" % value)  # significant digits: ratios can be 0.0002
        self.rows.append(dict(section=section, metric=metric, value=value, unit=unit,
                              target=target, ok=ok, note=note))

    def detail(self, key, value):
        """Raw data for the JSON only (every dnsperf try, per-query samples, ...)."""
        self.details[key] = value

    def table(self):
        head = ("section", "metric", "value", "target", "met", "note")
        lines = []
        for r in self.rows:
            value = "-" if r["value"] is None else "%s %s" % (_fmt(r["value"]), r["unit"])
            met = {True: "yes", False: "NO", None: ""}[r["ok"]]
            lines.append((r["section"], r["metric"], value.strip(), r["target"], met, r["note"]))
        widths = [max(len(str(x[i])) for x in [head] + lines) for i in range(len(head))]
        widths[-1] = 0
        fmt = "  ".join("%%-%ds" % w for w in widths)
        out = [fmt % head, "  ".join("-" * w for w in widths[:-1])]
        out += [(fmt % line).rstrip() for line in lines]
        return "\n".join(out)

    def to_json(self):
        return {"meta": self.meta, "rows": self.rows, "details": self.details}

    def write_json(self, path):
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=2, sort_keys=False)
            f.write("\n")


def _fmt(v):
    if isinstance(v, float):
        if abs(v) >= 100:
            return "%.0f" % v
        if abs(v) >= 10:
            return "%.1f" % v
        return "%.3g" % v
    return str(v)


def ms(seconds):
    return None if seconds is None else seconds * 1000.0
