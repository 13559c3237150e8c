#!/usr/bin/python3
"""Plots the logit lens written by `gradlab lens --out`: p(answer) per layer and position.

    gradlab lens --checkpoint RUN_DIR/best.h5 --input "3 1 4 1 5 9 2 6 5 3" --out lens.h5
    scripts/plot_lens.py lens.h5 out.png

One heatmap, layers down the side (the embedding first, the model's output last) and the
positions that predict something along the bottom (labelled "read -> answer"); each cell is
p(answer) read from that layer's residual stream and shows the layer's most likely token
(docs/hooks.md describes the file). Needs h5py, numpy and matplotlib; renders without a display.
"""

import sys

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

USAGE = "usage: plot_lens.py FILE.h5 OUT.png"
NO_TARGET = -100


def main(argv):
    if len(argv) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    path, out = argv[1], argv[2]
    with h5py.File(path, "r") as f:
        layers = [n.decode() if isinstance(n, bytes) else str(n) for n in f["layers"]]
        inputs, targets = np.asarray(f["inputs"]), np.asarray(f["targets"])
        probability = np.asarray(f["answer_probability"])  # [L + 1, T]
        top1 = np.asarray(f["top_tokens"])[:, :, 0]  # [L + 1, T]
    shown = np.flatnonzero(targets != NO_TARGET)
    if shown.size == 0:
        print(f"plot_lens.py: {path} has no position with an answer", file=sys.stderr)
        return 1
    fig, ax = plt.subplots(figsize=(0.7 * shown.size + 2.5, 0.6 * len(layers) + 1.6))
    image = ax.imshow(probability[:, shown], aspect="auto", cmap="viridis", vmin=0, vmax=1,
                      interpolation="nearest")
    for row in range(len(layers)):
        for column, t in enumerate(shown):
            p = probability[row, t]
            ax.text(column, row, str(top1[row, t]), ha="center", va="center", fontsize=8,
                    color="black" if p > 0.6 else "white")
    ax.set_yticks(range(len(layers)), layers)
    ax.set_xticks(range(shown.size), [f"{inputs[t]}\u2192{targets[t]}" for t in shown],
                  fontsize=8)
    ax.set_xlabel("position: token read \u2192 answer")
    ax.set_title("logit lens: p(answer) per layer; each cell shows its most likely token",
                 fontsize=9)
    fig.colorbar(image, ax=ax, label="p(answer)")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
