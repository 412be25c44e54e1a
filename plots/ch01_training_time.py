#!/usr/bin/env python3
"""Chapter 01: days to train a 70B model on 15T tokens, against MFU, for three cluster sizes.

The napkin estimate is work / (GPUs x peak x MFU): halving MFU doubles the time just as halving
the cluster does, so utilisation is worth as much as hardware.
"""
from plotting import paths, plt, read_rows, save

src, out = paths("ch01_training_time.csv", "ch01_training_time.png")
rows = read_rows(src)
fig, ax = plt.subplots(figsize=(6.4, 4.2))
for gpus in sorted({int(r["gpus"]) for r in rows}):
    pts = [(float(r["mfu"]), float(r["days"])) for r in rows if int(r["gpus"]) == gpus]
    ax.plot([p[0] * 100 for p in pts], [p[1] for p in pts], marker="o", ms=3, label=f"{gpus} H100s")
est = next(float(r["days"]) for r in rows if int(r["gpus"]) == 1024 and float(r["mfu"]) == 0.5)
ax.scatter([50], [est], color="black", zorder=3)
ax.annotate(f"the estimate: {est:.0f} days", (50, est), xytext=(60, est / 2.4),
            arrowprops=dict(arrowstyle="->"))
ax.axvspan(30, 60, color="grey", alpha=0.12, label="typical MFU (30-60%)")
ax.set_yscale("log")
ax.set_xlabel("MFU (% of the 989.5 TFLOP/s dense bf16 peak)")
ax.set_ylabel("days to train (log scale)")
ax.set_title("70B parameters, 15T tokens: 6.3e24 FLOPs")
ax.grid(True, which="both", alpha=0.3)
ax.legend()
save(fig, out)
