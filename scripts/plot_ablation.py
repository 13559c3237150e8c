#!/usr/bin/python3
"""Plots the table `gradlab ablate --out` writes: the held-out loss increase of each part.

    gradlab ablate --checkpoint RUN_DIR/best.h5 --out ablation.csv
    scripts/plot_ablation.py ablation.csv out.png

One heatmap, the attention layers down the side and their heads (then the block's feed-forward
sublayer, "ffn") across, each cell the held-out loss with that part knocked out minus the intact
model's, written in the cell. Needs numpy and matplotlib; renders without a display.
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

USAGE = "usage: plot_ablation.py ABLATION.csv OUT.png"


def table(rows):
    """(layer names, column names, [layers, columns] loss increases with NaN where none)."""
    layers, cells, heads = [], {}, 0
    for row in rows:
        if row["point"] == "intact" or row["point"].startswith("together:"):
            continue  # the intact model, and the set of --together, are not cells
        point = row["point"]
        if row["head"]:
            layer, column = point.rsplit(".", 1)[0], int(row["head"])
            heads = max(heads, column + 1)
        else:
            layer, column = point.rsplit(".", 1)[0] + ".attn", "ffn"
        if layer not in layers:
            layers.append(layer)
        cells[(layer, column)] = float(row["loss_increase"])
    columns = list(range(heads)) + ["ffn"]
    values = np.full((len(layers), len(columns)), np.nan)
    for (layer, column), value in cells.items():
        values[layers.index(layer), columns.index(column)] = value
    return layers, [f"head {c}" if c != "ffn" else c for c in columns], values


def main(argv):
    if len(argv) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    with open(argv[1], newline="") as f:
        rows = list(csv.DictReader(f))
    intact = next(float(r["loss"]) for r in rows if r["point"] == "intact")
    layers, columns, values = table(rows)
    fig, ax = plt.subplots(figsize=(1.1 * len(columns) + 2.5, 0.6 * len(layers) + 1.8))
    image = ax.imshow(values, cmap="Reds", aspect="auto", vmin=0)
    top = np.nanmax(values) if np.isfinite(values).any() else 0
    for (i, j), value in np.ndenumerate(values):
        if not np.isnan(value):
            color = "white" if value > 0.6 * top else "black"
            ax.text(j, i, f"{value:.3f}", ha="center", va="center", fontsize=8, color=color)
    ax.set_xticks(range(len(columns)), columns)
    ax.set_yticks(range(len(layers)), layers)
    ax.set_title(f"held-out loss increase with one part knocked out (intact {intact:.4f})",
                 fontsize=9)
    fig.colorbar(image, ax=ax, label="loss increase (nats)")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
