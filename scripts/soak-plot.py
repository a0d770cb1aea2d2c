#!/usr/bin/python3
"""Plot a soak's resident memory over time as a small SVG (standard library only).

    /usr/bin/python3 scripts/soak-plot.py soak.json docs/soak-rss.svg [--title TEXT]
    /usr/bin/python3 scripts/soak-plot.py before.json after.json docs/soak-rss.svg

Reads the JSON reports of scripts/soak.py (--report): the RSS samples, the warm-up and the
slope. Each report is one line; the warm-up is shaded and the least-squares line over the
samples after it is drawn dashed, with its slope in the legend. For a PNG:
chromium --headless --screenshot=OUT.png --window-size=720,300 file://$PWD/OUT.svg"""

from __future__ import annotations

import argparse
import json
import sys
from xml.sax.saxutils import escape

W, H = 720, 300
LEFT, RIGHT, TOP, BOTTOM = 70, 20, 36, 40
COLOURS = ("#1f77b4", "#d62728", "#2ca02c")


def fit(samples):
    """(slope per second, intercept) of the least-squares line, or None."""
    n = len(samples)
    if n < 3:
        return None
    mt = sum(t for t, _ in samples) / n
    mk = sum(k for _, k in samples) / n
    var = sum((t - mt) ** 2 for t, _ in samples)
    if not var:
        return None
    slope = sum((t - mt) * (k - mk) for t, k in samples) / var
    return slope, mk - slope * mt


def plot(reports, labels, title):
    series = [[(t, kib / 1024.0) for t, kib in r["rss_samples"]] for r in reports]
    t_max = max(t for s in series for t, _ in s) or 1.0
    lo = min(m for s in series for _, m in s)
    hi = max(m for s in series for _, m in s)
    pad = max(0.5, (hi - lo) * 0.1)
    lo, hi = max(0.0, lo - pad), hi + pad

    def x(t):
        return LEFT + (W - LEFT - RIGHT) * t / t_max

    def y(mib):
        return TOP + (H - TOP - BOTTOM) * (1 - (mib - lo) / (hi - lo))

    out = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
           'font-size="11">' % (W, H), '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="20" font-size="13">%s</text>' % (LEFT, escape(title))]
    warmup = max(r.get("rss_warmup_s") or 0 for r in reports)
    if warmup:
        out.append('<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="#eee"/>' % (
            x(0), TOP, x(warmup) - x(0), H - TOP - BOTTOM))
        out.append('<text x="%.1f" y="%d" fill="#777">warm-up</text>' % (x(0) + 4, TOP + 12))
    for i in range(6):   # grid and axis labels
        mib = lo + (hi - lo) * i / 5
        out.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (LEFT, W - RIGHT, y(mib), y(mib)))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%.1f</text>' % (LEFT - 6, y(mib) + 4, mib))
        t = t_max * i / 5
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (
            x(t), H - BOTTOM + 16, ("%.0f" if t_max >= 600 else "%.1f") % (t / 60)))
    out.append('<text x="%d" y="%d" text-anchor="middle">minutes</text>' % ((LEFT + W - RIGHT) // 2, H - 6))
    out.append('<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">RSS, MiB</text>' % (
        H // 2, H // 2))
    out.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>' % (
        LEFT, TOP, W - LEFT - RIGHT, H - TOP - BOTTOM))
    for i, (s, r, label) in enumerate(zip(series, reports, labels)):
        colour = COLOURS[i % len(COLOURS)]
        out.append('<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>' % (
            colour, " ".join("%.1f,%.1f" % (x(t), y(m)) for t, m in s)))
        line = fit([(t, m) for t, m in s if t >= (r.get("rss_warmup_s") or 0)])
        legend = label
        if line:
            slope, icpt = line
            t0 = r.get("rss_warmup_s") or 0
            out.append('<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="5,4"/>' % (
                x(t0), y(icpt + slope * t0), x(t_max), y(icpt + slope * t_max), colour))
            legend += ": %+.2f KiB/min after the warm-up" % (slope * 60 * 1024)
        out.append('<text x="%d" y="%d" fill="%s">%s</text>' % (W - RIGHT - 330, TOP + 16 + 14 * i, colour,
                                                                 escape(legend)))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", help="soak.py JSON reports, then the SVG to write")
    ap.add_argument("--label", action="append", help="one per report (default: the file names)")
    ap.add_argument("--title", default="discovery-proxy resident memory during the soak")
    args = ap.parse_args(argv)
    if len(args.reports) < 2:
        ap.error("give at least one report and the SVG file to write")
    *paths, svg = args.reports
    reports = []
    for p in paths:
        with open(p) as f:
            reports.append(json.load(f))
    labels = args.label or paths
    with open(svg, "w") as f:
        f.write(plot(reports, labels, args.title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
