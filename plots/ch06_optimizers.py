#!/usr/bin/env python3
"""Chapter 06: the loss of each optimizer, step by step, on the documents' regression problem
(D = 16, B = 4, the same initial weights and batches for all). The hand-written optimizers lie
on the library's; SGD needs many steps, the adaptive methods fewer, and AdamW's default weight
decay holds its loss up. Each line is a running mean over 10 steps."""
from plotting import paths, plt, read_rows, save

src, out = paths("ch06_optimizers.csv", "ch06_optimizers.png")
curves = {}
for r in read_rows(src):
    curves.setdefault(r["optimizer"], ([], []))
    curves[r["optimizer"]][0].append(int(r["step"]))
    curves[r["optimizer"]][1].append(float(r["loss"]))
fig, ax = plt.subplots(figsize=(6.4, 4.0))
# Each batch is only 4 points, so a step's loss jumps about; the lines are means over the last
# 10 steps.
for name, (steps, losses) in curves.items():
    hand = name.startswith("Hand")
    smooth = [sum(losses[max(0, i - 9):i + 1]) / len(losses[max(0, i - 9):i + 1]) for i in range(len(losses))]
    ax.plot(steps, smooth, label=name, linestyle=":" if hand else "-", linewidth=2.4 if hand else 1.2)
ax.set_yscale("log")
ax.set_xlabel("step")
ax.set_ylabel("mean squared error, mean of 10 steps (log scale)")
ax.set_title("One problem, nine optimizers: the same start, the same batches")
ax.grid(True, which="both", alpha=0.3)
ax.legend(fontsize=7, ncol=2)
save(fig, out)
