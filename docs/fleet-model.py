#!/usr/bin/env python3
"""A model of the restart scenario of `make fleet`, used to choose kretry's
backoff defaults before measuring them (BENCHMARKS.md, "The fleet").

1,000 clients lose their watch at t=2 s; the server refuses connections until
t=2+down, then answers every resume with 410; each client then relists.
Stock client-go: the reflector re-watches at once and backs off on every
refused re-watch (800 ms doubling to 30 s, a draw from [step, 2*step)); after
the 410 it waits one more step of that backoff before it relists. Through
kretry: kretry retries the refused resumes with its own backoff (same steps,
draws as below), and the reflector, which saw no error, relists 0.8-1.6 s
after the 410 is handed over. Prints, per outage length and candidate, the
peak request rate over 1 s windows, and when half and all of the relists
had been sent (seconds after the server came back), averaged over 4 seeds.

    python3 docs/fleet-model.py
"""
import random

N, DOWN_AT = 1000, 2.0

def fleet(up, reopen_wait, relist_delay, seed):
    random.seed(seed)
    requests, relists = [], []
    for _ in range(N):
        t, step = DOWN_AT, 0.8
        while t < up:  # refused, until the server is back
            t += reopen_wait(step)
            step = min(step * 2, 30)
        relist = t + relist_delay(step)
        requests += [t, relist]
        relists.append(relist)
    bins = {}
    for r in requests:
        bins[int(r * 10)] = bins.get(int(r * 10), 0) + 1
    counts = [bins.get(i, 0) for i in range(max(bins) + 1)]
    peak = max(sum(counts[i:i + 10]) for i in range(len(counts)))
    relists.sort()
    return peak, relists[N // 2] - up, relists[-1] - up

def reflector():  # client-go's reflector relists 0.8-1.6 s after the 410
    return 0.8 * (1 + random.random())

CANDIDATES = {
    "client-go (stock)": (lambda s: s * (1 + random.random()), lambda s: s * (1 + random.random())),
    "kretry, client-go's jitter": (lambda s: s * (1 + random.random()), lambda s: reflector()),
    "kretry, full jitter": (lambda s: 2 * s * random.random(), lambda s: reflector()),
    "kretry, [s/2, 5s/2)": (lambda s: s * random.uniform(0.5, 2.5), lambda s: reflector()),
    "kretry, [s/2, 5s/2) + 410 hold [0, s)": (
        lambda s: s * random.uniform(0.5, 2.5), lambda s: random.random() * s + reflector()),
    "kretry, [s/2, 5s/2) + 410 hold [0, min(s, 8 s)) (chosen)": (
        lambda s: s * random.uniform(0.5, 2.5), lambda s: random.random() * min(s, 8) + reflector()),
}

for down in (5, 10, 20, 30):
    print(f"server down {down} s: peak r/s (1 s windows), half / all relisted after it came back")
    for name, (wait, delay) in CANDIDATES.items():
        runs = [fleet(DOWN_AT + down, wait, delay, seed) for seed in range(4)]
        peak, half, last = (sum(r[i] for r in runs) / len(runs) for i in range(3))
        print(f"  {name:56s} {peak:6.0f} {half:6.1f} s {last:6.1f} s")

# How much the busiest second moves from run to run: 20 seeds of a 10 s outage, stock client-go
# against the chosen candidate.
print("server down 10 s, busiest second over 20 seeds: min / mean / max")
for name in ("client-go (stock)", "kretry, [s/2, 5s/2) + 410 hold [0, min(s, 8 s)) (chosen)"):
    wait, delay = CANDIDATES[name]
    peaks = [fleet(DOWN_AT + 10, wait, delay, seed)[0] for seed in range(20)]
    print(f"  {name:56s} {min(peaks):4d} / {sum(peaks) / len(peaks):5.1f} / {max(peaks):4d}")
