#!/usr/bin/env python3
"""Chapter 04: matmul TFLOP/s against n, one line per device and dtype.

Small matrices do not pay for a GPU: the work is too little to hide the launch and to fill the
device. The curves rise with n until the hardware, not the overhead, sets the rate.
"""
from plotting import paths, plt, read_rows, save

src, out = paths("ch04_matmul.csv", "ch04_tflops.png")
rows = read_rows(src)
fig, ax = plt.subplots(figsize=(6.4, 4.2))
series = {}
for r in rows:
    series.setdefault((r["device"], r["dtype"]), []).append((int(r["n"]), float(r["tflops"])))
for (device, dtype), pts in series.items():
    pts.sort()
    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{device} {dtype}")
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("n (an n x n @ n x n matmul)")
ax.set_ylabel("TFLOP/s (log scale)")
has_gpu = any(device == "cuda" for device, _ in series)
ax.set_title("matmul throughput" + ("" if has_gpu else " (drawn on a machine without a GPU: CPU only)"))
ax.grid(True, which="both", alpha=0.3)
ax.legend()
save(fig, out, measured=True)
