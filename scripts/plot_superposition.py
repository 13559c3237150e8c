#!/usr/bin/python3
"""Plots the table `gradlab superposition --out` writes: Elhage et al.'s two pictures of a toy
model of superposition.

    gradlab superposition --checkpoint RUN_DIR/step-010000.h5 --out superposition.csv
    scripts/plot_superposition.py superposition.csv out.png

Top: each instance's W columns in its two dimensions, a line from the origin per feature
(colour by importance: feature 0 darkest), the instance's density above it. Bottom: each
feature's dimensionality D_i against its instance's density (log scale), with the fractions
1, 1/2 and 2/5 (a dimension each, antipodal pairs, the pentagon) marked. Needs numpy and
matplotlib; renders without a display.
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

USAGE = "usage: plot_superposition.py SUPERPOSITION.csv OUT.png"


def read(path):
    """(densities [I], W columns [I, n, 2], dimensionality [I, n]) from the CSV."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or "w1" not in rows[0] or "w2" in rows[0]:
        raise ValueError(f"{path}: not the table of a model with two dimensions (w0, w1)")
    instances = 1 + max(int(r["instance"]) for r in rows)
    features = 1 + max(int(r["feature"]) for r in rows)
    densities = np.zeros(instances)
    columns = np.zeros((instances, features, 2))
    dims = np.zeros((instances, features))
    for r in rows:
        j, i = int(r["instance"]), int(r["feature"])
        densities[j] = float(r["density"])
        columns[j, i] = float(r["w0"]), float(r["w1"])
        dims[j, i] = float(r["dimensionality"])
    return densities, columns, dims


def main(argv):
    if len(argv) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        densities, columns, dims = read(argv[1])
    except (OSError, ValueError, KeyError) as e:
        print(f"plot_superposition.py: {e}", file=sys.stderr)
        return 1
    instances, features = dims.shape
    colours = plt.cm.viridis(np.linspace(0, 0.85, features))
    fig = plt.figure(figsize=(1.6 * instances, 5.2))
    grid = fig.add_gridspec(2, instances, height_ratios=[1, 1.6])
    reach = 1.1 * max(np.abs(columns).max(), 1e-9)
    for j in range(instances):
        ax = fig.add_subplot(grid[0, j])
        for i in range(features):
            x, y = columns[j, i]
            ax.plot([0, x], [0, y], color=colours[i], lw=1.5)
            ax.scatter([x], [y], color=colours[i], s=12, zorder=3)
        ax.set_xlim(-reach, reach)
        ax.set_ylim(-reach, reach)
        ax.set_aspect("equal")
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(f"p = {densities[j]:.3g}", fontsize=8)
    ax = fig.add_subplot(grid[1, :])
    for fraction, label in [(1, "1"), (1 / 2, "1/2"), (2 / 5, "2/5")]:
        ax.axhline(fraction, color="grey", lw=0.6, ls=":")
        ax.text(densities.min() * 0.93, fraction, label, fontsize=7, va="center", ha="right",
                color="grey")
    for i in range(features):
        ax.scatter(densities, dims[:, i], color=colours[i], s=18, label=f"feature {i}")
    ax.set_xscale("log")
    ax.invert_xaxis()
    ax.set_xlabel("feature density (sparser to the right)")
    ax.set_ylabel("dimensionality D_i")
    ax.set_ylim(-0.05, 1.1)
    ax.legend(fontsize=7, ncol=5, loc="lower left")
    fig.suptitle("toy model of superposition: W's columns per instance, and D_i against density",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
