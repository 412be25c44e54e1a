#!/usr/bin/env python3
"""Chapter 07: where the memory of one training step goes, and what checkpointing saves.

Left: the allocator's counters, sample by sample, through one AdamW step of the MLP
1024 -> 4096 -> ReLU -> 1024, stacked by category. The weights sit there the whole time; the
forward pass adds only the activations kept for backward; backward adds the gradients, one
AccumulateGrad at a time, while the temporaries of each matrix product come and go; the first
optimizer step allocates AdamW's two moments, twice the weights, and that is the step's peak;
zero_grad frees the gradients but the optimizer state stays. The black line is the peak, the
highest total since the previous sample, which catches temporaries freed before a sample.
Right: a ReLU MLP of width 256 for a batch of 1024, deeper and deeper, trained plain and with
every sqrt(depth) layers one checkpointed region (the labels give the layers per region). Both
are measured above what was allocated before the step. Plain, the activations kept grow with the
depth, one layer's worth each; checkpointed, only the regions' inputs and one region's recomputed
insides are alive at once, so they grow about like sqrt(depth), and the step's peak with them.
"""
import os
import sys

from plotting import paths, plt, read_rows, save

MIB = 1024.0 * 1024.0
src, out = paths("ch07_timeline.csv", "ch07_memory.png")
timeline = read_rows(src)
checkpointing = read_rows(os.path.join(sys.argv[1], "ch07_checkpointing.csv"))

fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))

# The timeline, stacked by category.
index = [int(r["index"]) for r in timeline]
categories = [("weights", "weights"), ("gradients", "gradients"), ("optimizer_state", "optimizer state"),
              ("activations", "activations"), ("temporaries", "temporaries")]
colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]
left.stackplot(index, [[int(r[c]) / MIB for r in timeline] for c, _ in categories],
               labels=[name for _, name in categories], colors=colors, alpha=0.85, linewidth=0)
peak = [int(r["peak"]) / MIB for r in timeline]
left.plot(index, peak, color="black", linewidth=0.9, label="peak since the last sample")

# The phases: alternate spans shaded, the wide ones named at the top, the narrow ones (one
# sample each, at the end) named by arrows from the empty space above backward.
spans = []
for i, r in zip(index, timeline):
    if spans and spans[-1][0] == r["phase"]:
        spans[-1][2] = i
    else:
        spans.append([r["phase"], i, i])
top = max(peak) * 1.4
left.set_ylim(0, top)
left.set_xlim(index[0] - 0.5, index[-1] + 0.5)
narrow = [s for s in spans if s[2] - s[1] < 3]
for k, (phase, first, last) in enumerate(spans):
    if k % 2 == 1:
        left.axvspan(first - 0.5, last + 0.5, color="grey", alpha=0.12, linewidth=0)
    if k > 0:
        left.axvline(first - 0.5, color="grey", linestyle="--", linewidth=0.7)
    if [phase, first, last] not in narrow:
        left.text((first + last) / 2, top * 0.97, phase, ha="center", va="top", fontsize=9, style="italic")
for j, (phase, first, last) in enumerate(narrow):
    y = top * (0.84 - 0.08 * j)
    left.annotate(phase, xy=((first + last) / 2, y), xytext=(index[-1] - 5.5, y), ha="right",
                  va="center", fontsize=9, style="italic",
                  arrowprops=dict(arrowstyle="->", color="black", linewidth=0.7))
left.set_xlabel("sample (an op, a backward node, the step)")
left.set_ylabel("MiB")
left.set_title("One training step, by category")
left.legend(loc="upper left", bbox_to_anchor=(0.0, 0.88), fontsize=7.5, framealpha=0.9)

# Checkpointing against depth.
depth = [int(r["depth"]) for r in checkpointing]
for key, name, color in (("plain", "plain", "#1f77b4"), ("ckpt", "checkpointed", "#d62728")):
    right.plot(depth, [float(r[f"{key}_activations_mib"]) for r in checkpointing], color=color,
               marker="o", linestyle="-", label=f"{name}: activations")
    right.plot(depth, [float(r[f"{key}_peak_mib"]) for r in checkpointing], color=color,
               marker="s", linestyle="--", label=f"{name}: step peak")
for r in checkpointing:
    right.annotate(f"{r['segment']} per region", (int(r["depth"]), float(r["ckpt_activations_mib"])),
                   xytext=(0, -13), textcoords="offset points", ha="center", fontsize=7, color="#d62728")
right.set_xscale("log", base=2)
right.set_xticks(depth)
right.set_xticklabels([str(d) for d in depth])
right.minorticks_off()
right.set_xlim(depth[0] / 1.3, depth[-1] * 1.3)
right.set_ylim(bottom=0)
right.set_xlabel("depth (layers)")
right.set_ylabel("MiB")
right.set_title("Checkpointing every sqrt(depth) layers")
right.grid(True, alpha=0.3)
right.legend(fontsize=8)

fig.tight_layout()
save(fig, out)
