#!/usr/bin/env python3
"""Chapter 02: the same twelve cells of memory read four ways.

Each row is the whole storage of x = arange(12).reshape(3, 4), cell 0 to 11. A view reads some
of the cells; the number in a cell is the order in which the view visits it (row-major order
of the view's indices). Cells a view never reads are left blank.
"""
from plotting import paths, plt, read_rows, save

src, out = paths("ch02_views.csv", "ch02_views.png")
rows = read_rows(src)
views = list(dict.fromkeys(r["view"] for r in rows))
cells = 12
fig, axes = plt.subplots(len(views), 1, figsize=(7.5, 1.05 * len(views) + 0.4))
colors = plt.get_cmap("viridis")
for ax, name in zip(axes, views):
    mine = [r for r in rows if r["view"] == name]
    order = {int(r["cell"]): int(r["order"]) for r in mine}
    for c in range(cells):
        read = c in order
        ax.add_patch(plt.Rectangle((c, 0), 0.92, 0.92, linewidth=1, edgecolor="black",
                                   facecolor=colors(order[c] / cells) if read else "white"))
        if read:
            ax.text(c + 0.46, 0.46, str(order[c]), ha="center", va="center", fontsize=11,
                    color="white" if order[c] < cells * 0.6 else "black")
        ax.text(c + 0.46, -0.25, str(c), ha="center", va="center", fontsize=7, color="grey")
    r0 = mine[0]
    ax.set_title(f"{name}: shape {r0['shape']}, strides {r0['strides']}, offset {r0['offset']}",
                 fontsize=10, loc="left", family="monospace")
    ax.set_xlim(-0.1, cells)
    ax.set_ylim(-0.45, 1.0)
    ax.axis("off")
fig.suptitle("one storage of 12 cells (grey: memory position); number: order the view reads it",
             fontsize=9, y=0.02)
fig.tight_layout()
save(fig, out)
