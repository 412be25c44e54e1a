#!/usr/bin/env python3
"""Chapter 09: the roofline of three GPUs and of this CPU, with the kernels the chapter timed.

The x axis is arithmetic intensity, an op's FLOPs over the bytes it must move; the y axis is
FLOP/s. Each machine is one bent line. Left of its kink the line rises with slope one: an op
there can do no more FLOP/s than its intensity times the memory's bytes/s, so it waits on
memory. Right of the kink the line is flat at the peak FLOP/s: the arithmetic is the limit. The
kink sits at the machine's accelerator intensity, peak FLOP/s over bytes/s (295 FLOP/byte for
the H100 SXM). The GPUs' lines are datasheet numbers for bfloat16; this CPU's line is what the
chapter measured in float32 (a 2048 x 2048 matmul for the peak, a 64 MiB clone for the bytes).

The dots are the kernels the chapter timed, at the FLOP/s they reached, on this CPU (and, for
the fusion section on a GPU machine, on the GPU: a dot has its device's colour). A dot on its line ran as
fast as the roofline allows; a dot below it lost time somewhere the roofline does not count. The
chapter's copy is left out: it does no FLOPs, so it has no place on a log axis (its bytes/s are
the CPU line's slope).

Input: CSV_DIR/ch09_roofs.csv (device, flop_per_sec, bytes_per_sec, intensity, source) and every
CSV_DIR/ch09_points_<part>.csv (kernel, device, flops, bytes, seconds, intensity, flop_per_sec,
bytes_per_sec): each section of the chapter that times kernels writes its own points file, and
each file gets its own marker.
"""
import glob
import os

from plotting import paths, plt, read_rows, save

src, out = paths("ch09_roofs.csv", "ch09_roofline.png")
roofs = [(r["device"], float(r["flop_per_sec"]), float(r["bytes_per_sec"])) for r in read_rows(src)]
parts = {}  # part -> rows of its points file
for path in sorted(glob.glob(os.path.join(os.path.dirname(src), "ch09_points_*.csv"))):
    part = os.path.basename(path)[len("ch09_points_"):-len(".csv")]
    parts[part] = [r for r in read_rows(path) if float(r["flops"]) > 0]

LOW, HIGH = 0.05, 5000  # FLOP/byte, the x axis
colors = ["#1f77b4", "#2ca02c", "#ff7f0e", "#d62728", "#9467bd", "#8c564b"]
color_of = {name: colors[i % len(colors)] for i, (name, _, _) in enumerate(roofs)}
markers = ["o", "s", "^", "D", "v"]



def rate(value, unit):
    """989.5 TFLOP/s, 84.2 GFLOP/s: the prefix that suits the number."""
    scale, prefix = (1e12, "T") if value >= 1e12 else (1e9, "G")
    return f"{value / scale:.4g} {prefix}{unit}/s"


fig, ax = plt.subplots(figsize=(8.5, 5.6))
for name, peak, bandwidth in roofs:
    ridge = peak / bandwidth
    color = color_of[name]
    # The roof: min(peak, intensity x bandwidth), a line up to the kink and flat after it.
    ax.plot([LOW, ridge, HIGH], [LOW * bandwidth, peak, peak], color=color, linewidth=2,
            label=f"{name}: {rate(peak, 'FLOP')}, {rate(bandwidth, 'B')}")
    ax.plot([ridge], [peak], marker="o", markersize=5, color=color)
    ax.annotate(f"{ridge:.0f}", (ridge, peak), textcoords="offset points", xytext=(0, 6),
                ha="center", fontsize=8, color=color)  # the kink: its accelerator intensity

# Each dot's label goes to the first of these places (offsets in points) where it overlaps no
# label placed before it: the fusion section's eager chains sit next to relu(x), its compiled
# scale-shift chain next to x @ v.
LABEL_OFFSETS = [(6, -10), (6, 5), (6, -21), (6, 16), (-6, -10), (-6, 5)]
placed = []  # the window extents of the labels so far


def place_label(text, x, y):
    renderer = fig.canvas.get_renderer()
    for dx, dy in LABEL_OFFSETS:
        label = ax.annotate(text, (x, y), textcoords="offset points", xytext=(dx, dy),
                            fontsize=8, ha="left" if dx > 0 else "right")
        box = label.get_window_extent(renderer)
        if not any(box.overlaps(other) for other in placed):
            break
        label.remove()
    else:  # nowhere free: the first place after all
        label = ax.annotate(text, (x, y), textcoords="offset points", xytext=LABEL_OFFSETS[0],
                            fontsize=8)
        box = label.get_window_extent(renderer)
    placed.append(box)


for k, (part, rows) in enumerate(parts.items()):
    marker = markers[k % len(markers)]
    for r in rows:
        x, y = float(r["intensity"]), float(r["flop_per_sec"])
        color = color_of.get(r["device"], "black")
        ax.plot([x], [y], marker=marker, linestyle="none", markersize=7, color=color,
                markeredgecolor="black", markeredgewidth=0.6)
    # A dot has its device's colour (the fusion section's CUDA points are on a GPU's roof).
    ax.plot([], [], marker=marker, linestyle="none", color="gray", markeredgecolor="black",
            label=f"timed by the chapter ({part})")

ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlim(LOW, HIGH)
ax.set_ylim(*ax.get_ylim())  # fixed now, so that the labels' places below stay where they are
for part, rows in parts.items():
    for r in rows:
        place_label(r["kernel"], float(r["intensity"]), float(r["flop_per_sec"]))
ax.set_xlabel("arithmetic intensity (FLOPs per byte moved)")
ax.set_ylabel("FLOP/s")
ax.set_title("The roofline: memory-bound left of each kink, compute-bound right of it")
ax.grid(True, which="major", alpha=0.3)
ax.legend(fontsize=8, loc="lower right")
fig.tight_layout()
save(fig, out, measured=True)
