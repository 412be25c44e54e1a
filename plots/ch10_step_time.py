#!/usr/bin/env python3
"""Chapter 10: time per data-parallel step against the number of processes, split into the part
spent only waiting for the gradients' all-reduces and the rest, with and without overlap.

Bars of the same height would mean perfect scaling of nothing: the global batch is fixed, so
each process computes 1/N of it, and what grows is the communication that backward could not
hide.
"""
from plotting import paths, plt, read_rows, save

src, out = paths("ch10_step_time.csv", "ch10_step_time.png")
rows = read_rows(src)
fig, ax = plt.subplots(figsize=(6.4, 4.2))
labels, rest, waiting = [], [], []
for r in rows:
    labels.append(f"{r['processes']} proc" + ("" if r["processes"] == "1" else
                                               f"\noverlap {r['overlap']}"))
    step, wait = float(r["step_ms"]), float(r["waiting_ms"])
    waiting.append(wait)
    rest.append(step - wait)
x = range(len(labels))
ax.bar(x, rest, label="compute (and communication hidden under it)", color="#4c72b0")
ax.bar(x, waiting, bottom=rest, label="waiting for the all-reduces", color="#dd8452")
ax.set_xticks(list(x))
ax.set_xticklabels(labels)
ax.set_ylabel("ms per step (median)")
ax.set_title("data-parallel step, global batch fixed (CPU processes over MPI)")
ax.grid(True, axis="y", alpha=0.3)
ax.set_ylim(0, max(r + w for r, w in zip(rest, waiting)) * 1.4)
ax.legend(loc="upper left", fontsize="small")
save(fig, out, measured=True)
