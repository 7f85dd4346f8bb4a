#!/usr/bin/env python3
"""Extrapolates TestFleetHA's measurements (make fleet-ha) to 5,000 and 50,000 node agents.

Reads one or more JSON files TestFleetHA wrote (one per fleet size, each holding runs behind
two apiservers, three, or both), and per apiserver count, pace and client fits each
control-plane figure of a rolling upgrade to a + b*N by least squares over every run. A run
without an apiserver count (files written before TestFleetHA recorded it) was behind two. A
figure is fitted only where every run of the group has it (files before the yardstick lack the
busiest 5 s, the bytes sent and the writer's latency). It prints the fit and its prediction at 5,000 and 50,000 agents with a range: the
prediction of the lines through the lowest and the highest run at each size (the spread
between runs, on a shared machine mostly the neighbours' load), widened by the residuals'
standard error times the distance from the measured sizes. The model is linear in N: each
agent's relists, resumes and bytes are taken to cost what they cost at the measured sizes.
What it cannot know is said in docs/fleet.md ("What the model predicts").

    python3 docs/fleet-ha-model.py docs/fleet-ha.json docs/fleet-ha-100.json docs/fleet-ha-300.json
"""
import json
import sys

FIGURES = [
    ("relists", lambda r: r["relists"]),
    ("fetches on the wire", lambda r: r["wire_fetches"]),
    ("apiserver CPU s", lambda r: sum(r["cpu"])),
    ("CPU s, busiest 5 s", lambda r: r["cpu_busiest_5s"]),
    ("etcd ranges", lambda r: r["etcd_ranges"]),
    ("MiB sent", lambda r: r["sent_bytes"] / 2**20),
    ("MiB read", lambda r: r["bytes"] / 2**20),
    ("PATCH p99 ms", lambda r: r["patch_p99_ms"]),
    ("peak req/s", lambda r: r["req_peak"]),
]
PREDICT = (5000, 50000)


def apiservers(run):
    """The run's apiserver count; runs written before TestFleetHA recorded it had two."""
    return run.get("apiservers") or 2


def values(runs, value):
    """(N, figure) of every run, or None when a run lacks the figure."""
    try:
        return [(r["agents"], value(r)) for r in runs]
    except KeyError:
        return None


def fit(points):
    """Least squares a + b*x; with one size only, a line through the origin."""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        b = sum(y for _, y in points) / max(sum(xs), 1)
        return 0.0, b, 0.0
    n = len(points)
    mx, my = sum(xs) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    a = my - b * mx
    res = [y - (a + b * x) for x, y in points]
    se = (sum(e * e for e in res) / max(n - 2, 1)) ** 0.5
    return a, b, se


def main(paths):
    runs = []
    for p in paths:
        with open(p) as f:
            runs += json.load(f)["runs"]
    groups = {}
    for r in runs:
        groups.setdefault((apiservers(r), r["pace"], r["client"]), []).append(r)
    for (servers, pace, client), rs in sorted(groups.items()):
        sizes = sorted({r["agents"] for r in rs})
        print(f"{servers} apiservers, {pace} pace, {client}: {len(rs)} runs at N = {', '.join(map(str, sizes))}")
        for name, value in FIGURES:
            points = values(rs, value)
            if points is None:
                continue
            a, b, se = fit(points)
            lo = fit([(n, min(v for m, v in points if m == n)) for n in sizes])
            hi = fit([(n, max(v for m, v in points if m == n)) for n in sizes])
            preds = []
            for n in PREDICT:
                mid = a + b * n
                spread = se * (n / max(sizes))
                low = min(lo[0] + lo[1] * n, mid) - spread
                high = max(hi[0] + hi[1] * n, mid) + spread
                # Every figure is a count or an amount: a line that falls below zero
                # (kretry's relists, flat in N) predicts none.
                preds.append(f"N={n}: {max(mid, 0):9.0f} [{max(low, 0):.0f}, {max(high, 0):.0f}]")
            print(f"  {name:20s} = {a:8.1f} + {b:8.4f}*N   " + "   ".join(preds))


if __name__ == "__main__":
    main(sys.argv[1:] or ["docs/fleet-ha.json"])
