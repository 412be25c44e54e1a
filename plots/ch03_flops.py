#!/usr/bin/env python3
"""Chapter 03: FLOPs of each recorded node of x -> x @ w1 -> @ w2 -> pow(2) -> mean, forward
and backward, as the tape counts them. The two matrix multiplies dominate, and each costs twice
as much backward as forward."""
from plotting import paths, plt, read_rows, save

src, out = paths("ch03_flops.csv", "ch03_flops.png")
rows = list(reversed(read_rows(src)))  # in forward order: first layer first
labels, seen = [], {}
for r in rows:
    seen[r["node"]] = seen.get(r["node"], 0) + 1
    labels.append(r["node"] + (f" ({seen[r['node']]})" if r["node"] == "MmBackward0" else ""))
fwd = [float(r["forward"]) for r in rows]
bwd = [float(r["backward"]) for r in rows]
fig, ax = plt.subplots(figsize=(6.4, 3.6))
ys = range(len(rows))
ax.barh([y + 0.2 for y in ys], fwd, height=0.4, label="forward")
ax.barh([y - 0.2 for y in ys], bwd, height=0.4, label="backward")
ax.set_yticks(list(ys), labels)
ax.set_xscale("log")
ax.set_xlabel("FLOPs (log scale)")
ax.set_title("B, D, K = 1024, 256, 64: backward = 2 x forward for the matmuls")
ax.grid(True, axis="x", which="both", alpha=0.3)
ax.invert_yaxis()  # forward order, top to bottom
ax.legend(loc="lower right")
save(fig, out)
