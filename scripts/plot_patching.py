#!/usr/bin/python3
"""Plots the results `gradlab patch --out` writes: how much of the clean run each patch restores.

    gradlab patch --checkpoint RUN_DIR/best.h5 --clean "3 1 4 1 5 9 2 6 5 3" \
        --corrupt "3 1 4 1 5 9 2 6 5 7" --per-position --out patch.h5
    scripts/plot_patching.py patch.h5 out.png

One heatmap, a row per patched point (or head of one), a column per position (one column
without --per-position), each cell the normalised logit difference: 0 the corrupted run, 1 the
clean one (blue below 0, red above). Needs h5py, numpy and matplotlib; renders without a display.
"""

import sys

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

USAGE = "usage: plot_patching.py PATCH.h5 OUT.png"


def main(argv):
    if len(argv) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    with h5py.File(argv[1], "r") as f:
        scores = f["scores"][()]
        rows = [r.decode() for r in f["rows"][()]]
        axes = [a.decode() for a in f["row_axes"][()]]
        clean, corrupt = f["clean_inputs"][()], f["corrupt_inputs"][()]
    fig, ax = plt.subplots(figsize=(0.45 * scores.shape[1] + 4, 0.32 * len(rows) + 1.8))
    image = ax.imshow(scores, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
    if scores.shape[1] > 1 and "T" in axes:
        labels = [f"{a}/{b}" if a != b else f"{a}" for a, b in zip(clean, corrupt)]
        ax.set_xticks(range(len(labels)), labels, rotation=90, fontsize=7)
        ax.set_xlabel("decoder position: token read (clean/corrupted where they differ)")
    else:
        ax.set_xticks([])
    ax.set_yticks(range(len(rows)), rows, fontsize=7)
    if scores.shape[1] <= 24:
        for (i, j), value in np.ndenumerate(scores):
            if not np.isnan(value) and abs(value) >= 0.005:
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=6)
    ax.set_title("activation patching: 0 = corrupted run, 1 = clean run", fontsize=9)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
