#!/usr/bin/env python3
"""Chapter 05, two figures.

ch05_layouts.png: the bits of each format, sign, exponent and mantissa, to scale.
ch05_running_sum.png: 1 + 0.0001 + 0.0001 + ... step by step in float32, bfloat16 and float16.
float32 climbs to 2 (drifting slightly); the 16-bit formats never leave 1, because each step is
smaller than half the gap between 1 and the next number they can represent.
"""
import sys

from plotting import paths, plt, read_rows, save

# The layouts.
src, out = paths("ch05_layouts.csv", "ch05_layouts.png")
rows = read_rows(src)
fig, ax = plt.subplots(figsize=(8, 0.55 * len(rows) + 0.6))
colors = {"sign": "#d62728", "exponent": "#1f77b4", "mantissa": "#2ca02c"}
for y, r in enumerate(rows):
    x = 0
    for part in ("sign", "exponent", "mantissa"):
        for _ in range(int(r[part])):
            ax.add_patch(plt.Rectangle((x, -y), 1, 0.7, facecolor=colors[part], edgecolor="white", linewidth=0.6))
            x += 1
    ax.text(-0.6, -y + 0.35, r["format"], ha="right", va="center", family="monospace", fontsize=9)
    ax.text(x + 0.5, -y + 0.35, f"{r['exponent']}e {r['mantissa']}m", va="center", fontsize=8, color="grey")
for part, c in colors.items():
    ax.bar(0, 0, color=c, label=part)
ax.set_xlim(-9, 37)
ax.set_ylim(-len(rows) + 0.5, 1.4)
ax.axis("off")
ax.legend(loc="upper right", ncol=3, fontsize=8, frameon=False)
ax.set_title("bits per format: the exponent sets the range, the mantissa the precision", fontsize=10)
save(fig, out)

# The running sums.
src, out = paths("ch05_running_sum.csv", "ch05_running_sum.png")
rows = read_rows(src)
fig, ax = plt.subplots(figsize=(6.4, 3.8))
steps = [int(r["step"]) for r in rows]
for name, style in (("float32", "-"), ("bfloat16", "--"), ("float16", ":")):
    ax.plot(steps, [float(r[name]) for r in rows], style, label=name, linewidth=2)
ax.plot(steps, [1 + s * 1e-4 for s in steps], color="grey", linewidth=0.8, label="exact")
ax.set_xlabel("number of additions of 0.0001")
ax.set_ylabel("value")
ax.set_title("1 + 0.0001 + 0.0001 + ...: the 16-bit formats never move")
ax.grid(True, alpha=0.3)
ax.legend()
save(fig, out)
