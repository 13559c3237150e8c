#!/usr/bin/python3
"""Plots the head scores written by `gradlab heads` as three heatmaps side by side.

    gradlab heads --checkpoint RUN_DIR/best.h5 --out heads.h5
    scripts/plot_heads.py heads.h5 out.png

The file (docs/hooks.md, "Head scores") holds /previous_token, /duplicate_token and /induction,
each [L, H] (a row per attention point in forward order), the point names in /points and the
attributes length, sequences and seed. Each score becomes a heatmap of points down the side and
heads across, coloured on 0..1 with the value written in each cell. Needs h5py, numpy and
matplotlib; renders without a display.
"""

import sys

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

USAGE = "usage: plot_heads.py FILE.h5 OUT.png"
KINDS = [("previous_token", "previous token"), ("duplicate_token", "duplicate token"),
         ("induction", "induction")]


def layer_label(point):
    """'blocks.1' for blocks.1.attn.hook_pattern, 'decoder.0.cross_attn' for its cross-attention."""
    label = point.removesuffix(".hook_pattern")
    return label.removesuffix(".attn")


def main(argv):
    if len(argv) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    path, out = argv[1], argv[2]
    with h5py.File(path, "r") as f:
        missing = [name for name, _ in KINDS + [("points", "")] if name not in f]
        if missing:
            print(f"plot_heads.py: {path} has no {', '.join(missing)}: not a `gradlab heads` file",
                  file=sys.stderr)
            return 1
        points = [layer_label(p) for p in f["points"].asstr()[:]]
        scores = [np.asarray(f[name]) for name, _ in KINDS]
        length, sequences = int(f.attrs["length"]), int(f.attrs["sequences"])
    heads = scores[0].shape[1]
    size = (2.2 + 3 * (1.2 + 0.55 * heads), 1.2 + 0.45 * len(points))
    fig, axes = plt.subplots(1, 3, figsize=size, squeeze=False, sharey=True, layout="constrained")
    for ax, (_, title), values in zip(axes[0], KINDS, scores):
        image = ax.imshow(values, vmin=0, vmax=1, cmap="viridis", aspect="auto",
                          interpolation="nearest")
        for (row, head), value in np.ndenumerate(values):
            ax.text(head, row, f"{value:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if value > 0.6 else "white")
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(heads), [str(h) for h in range(heads)], fontsize=7)
        ax.set_xlabel("head", fontsize=8)
        ax.set_yticks(range(len(points)), points, fontsize=7)
    fig.colorbar(image, ax=axes[0].tolist(), fraction=0.03, pad=0.01)
    fig.suptitle(f"head scores: n = {length} random tokens repeated twice, {sequences} sequences",
                 fontsize=9)
    fig.savefig(out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
