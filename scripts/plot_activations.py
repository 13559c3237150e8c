#!/usr/bin/python3
"""Plots the activations written by `gradlab activations`, one heatmap per dataset.

    gradlab activations --checkpoint RUN_DIR/best.h5 --input "3 1 4 1 5 9 2 6 5 3" \
        --names 'blocks.*.hook_resid_post' 'blocks.*.attn.hook_pattern' --out act.h5
    scripts/plot_activations.py act.h5 out.png [NAME_SUBSTRING ...]

Each dataset (docs/hooks.md: named as its hook point, without the batch axis, with its shape in
the tutorial's letters as the attribute `letters`) becomes one heatmap with the positions down the
side: [T, X] as it is; [T, H, D] as each head's vector norm, [T, H]; [H, Tq, Tk] (scores,
patterns) as the heads side by side, [Tq, H * Tk]. Only the datasets whose names contain one of
the NAME_SUBSTRINGs when given. Needs h5py, numpy and matplotlib; renders without a display.
"""

import sys

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

USAGE = "usage: plot_activations.py FILE.h5 OUT.png [NAME_SUBSTRING ...]"


def as_matrix(name, values, letters):
    """The 2-D picture of one dataset and what its columns are."""
    if values.ndim == 2:
        return values, letters
    if values.ndim == 3 and letters.startswith("[H,"):
        return np.concatenate(list(values), axis=1), "heads side by side: " + letters
    if values.ndim == 3:
        return np.linalg.norm(values, axis=-1), "norm over the last axis of " + letters
    raise ValueError(f"{name}: cannot draw a dataset of {values.ndim} axes")


def main(argv):
    if len(argv) < 3:
        print(USAGE, file=sys.stderr)
        return 2
    path, out, wanted = argv[1], argv[2], argv[3:]
    with h5py.File(path, "r") as f:
        names = [n for n in f if n not in ("inputs", "answer", "source")]
        names = [n for n in names if not wanted or any(w in n for w in wanted)]
        if not names:
            print(f"plot_activations.py: {path} holds no dataset to draw", file=sys.stderr)
            return 1
        fig, axes = plt.subplots(len(names), 1, figsize=(8, 2.4 * len(names)), squeeze=False)
        for ax, name in zip(axes[:, 0], names):
            letters = f[name].attrs.get("letters", b"")
            letters = letters.decode() if isinstance(letters, bytes) else str(letters)
            matrix, caption = as_matrix(name, np.asarray(f[name]), letters)
            shown = np.where(np.isfinite(matrix), matrix, np.nan)
            image = ax.imshow(shown, aspect="auto", cmap="viridis", interpolation="nearest")
            ax.set_title(f"{name}  ({caption})", fontsize=8)
            ax.set_ylabel("position")
            fig.colorbar(image, ax=ax)
        fig.tight_layout()
        fig.savefig(out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
