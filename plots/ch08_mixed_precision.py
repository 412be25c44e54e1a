#!/usr/bin/env python3
"""Chapter 08: one small problem trained five ways, and the loss scale GradScaler chose.

Left: the loss of each run, step by step, on a log scale. All five runs train the same student
network on the same batches from the same start; they differ only in where 16-bit numbers are
used. Each step's loss comes from a batch of 64, so it jitters; every curve is a running mean
over the last 20 steps (fewer at the start). The dashed line is the best loss there is, 1e-8,
set by the noise added to the targets. float32, mixed bfloat16 and float16 with GradScaler
end within 10% of it and lie on top of each other. Pure bfloat16, whose weights and optimizer state are
bfloat16 too, flattens out about ten times higher, because most of its updates round away.
float16 without loss scaling ends higher still, about thirty times float32's loss, because most
of its weight gradients are exactly 0.
Right: the scale GradScaler multiplied the loss by at each step of the float16 run, as a power
of two. It starts at 2^16 and doubles after every 25 steps in a row without an inf or a NaN (the
chapter's growth_interval; PyTorch's default is 2000). Near 2^37 a float16 gradient overflows:
the red crosses mark those steps, which the scaler skipped, halving the scale each time. From
then on the scale sits at 2^36 and tries 2^37 again after every 25 clean steps.
"""
import math

from plotting import paths, plt, read_rows, save

src, out = paths("ch08_losses.csv", "ch08_mixed_precision.png")
WINDOW = 20
NOISE_FLOOR = 1e-8  # the label noise, 1e-4, squared
SCALED = "float16 with GradScaler"

runs = {}  # run -> (steps, losses, scales), in the program's order
for row in read_rows(src):
    steps, losses, scales = runs.setdefault(row["run"], ([], [], []))
    steps.append(int(row["step"]))
    losses.append(float(row["loss"]))
    scales.append(float(row["scale"]))


def running_mean(values, window):
    return [sum(values[max(0, i - window + 1):i + 1]) / len(values[max(0, i - window + 1):i + 1])
            for i in range(len(values))]


fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))

# The five loss curves. The three that reach the floor coincide, so they get different dashes.
styles = {
    "float32": dict(color="#1f77b4", linestyle="-", linewidth=2.6),
    "pure bfloat16": dict(color="#d62728", linestyle="-", linewidth=1.4),
    "mixed bfloat16": dict(color="#ff7f0e", linestyle="--", linewidth=1.6),
    "float16, no loss scaling": dict(color="#9467bd", linestyle="-", linewidth=1.4),
    SCALED: dict(color="#2ca02c", linestyle=":", linewidth=2.0),
}
for name, (steps, losses, _) in runs.items():
    left.plot(steps, running_mean(losses, WINDOW), label=name, **styles.get(name, {}))
left.axhline(NOISE_FLOOR, color="black", linestyle="--", linewidth=0.9,
             label="best possible: the label noise, 1e-8")
left.set_yscale("log")
left.set_xlim(0, max(max(s) for s, _, _ in runs.values()))
left.set_xlabel("step")
left.set_ylabel(f"mean squared error, mean of {WINDOW} steps")
left.set_title("One problem, five precisions")
left.grid(True, which="major", alpha=0.3)
left.legend(fontsize=8)

# GradScaler's scale: the one each step used (the scale after the step before it), as log2.
steps, _, after = runs[SCALED]
used = [65536.0] + after[:-1]
log2_used = [math.log2(s) for s in used]
right.plot(steps, log2_used, color="#2ca02c", drawstyle="steps-post", linewidth=1.4,
           label="the scale a step used")
skipped = [(s, math.log2(u)) for s, u, a in zip(steps, used, after) if a < u]
right.plot([s for s, _ in skipped], [y for _, y in skipped], linestyle="none", marker="x",
           color="#d62728", markersize=7, markeredgewidth=1.6,
           label=f"inf or NaN: step skipped, scale halved ({len(skipped)} steps)")
low, high = math.floor(min(log2_used)), math.ceil(max(log2_used))
ticks = list(range(high, low - 1, -3))[::-1]  # every third power, the highest one included
right.set_yticks(ticks)
right.set_yticklabels([f"$2^{{{k}}}$" for k in ticks])
right.set_ylim(low - 1, high + 2)
right.set_xlim(0, steps[-1])
right.set_xlabel("step")
right.set_ylabel("loss scale")
right.set_title("GradScaler's scale (growth_interval 25)")
right.grid(True, alpha=0.3)
right.legend(loc="lower right", fontsize=8)

fig.tight_layout()
save(fig, out)
