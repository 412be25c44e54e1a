"""What the figure scripts share: arguments, the CSV reader, and one look for every figure."""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402


def paths(csv_name, png_name):
    """(csv path, png path) from the command line: plot.py CSV_DIR OUT_DIR."""
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} CSV_DIR OUT_DIR")
    csv_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    return os.path.join(csv_dir, csv_name), os.path.join(out_dir, png_name)


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def save(fig, path, measured=False):
    """Writes the figure to `path`. A figure of timings (`measured`) that is already there is
    replaced only when TINY_PLOTS_REFRESH=1 (make plots REFRESH=1): timings move with how busy
    the machine is, so an ordinary `make plots` draws them beside the build's CSV instead, and
    the committed figure changes only when someone means it to."""
    if measured and os.path.exists(path) and os.environ.get("TINY_PLOTS_REFRESH") != "1":
        side = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "plots",
                            os.path.basename(path))
        os.makedirs(os.path.dirname(side), exist_ok=True)
        fig.savefig(side, dpi=150, bbox_inches="tight", metadata={"Software": None})
        plt.close(fig)
        print(f"kept {path} (this machine's timings, drawn in {side}; "
              "make plots REFRESH=1 replaces it)")
        return
    fig.savefig(path, dpi=150, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    print(f"wrote {path}")
