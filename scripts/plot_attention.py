#!/usr/bin/python3
"""Plots the attention weights written by `gradlab attention` as a grid of heatmaps.

    gradlab attention --checkpoint RUN_DIR/best.h5 --input "3 1 4 1 5 9 2 6 5 3" --out att.h5
    scripts/plot_attention.py att.h5 out.png

One row per layer and one column per head; each heatmap has the query positions down the side
and the key positions along the bottom, labelled with their tokens (the separator 0 as SEP).
The file (see interp/files/attention_file.h) holds one float32 dataset [H, Tq, Tk] per layer, named
layer_<i> for the decoder-only model and encoder_layer_<i> / decoder_layer_<i> (self-attention)
and decoder_cross_layer_<i> (cross-attention) for the encoder-decoder, each with int64
attributes query_tokens [Tq] and key_tokens [Tk] (docs/attention-file.md).

Needs h5py, numpy and matplotlib; renders without a display.
"""

import re
import sys

import matplotlib

matplotlib.use("Agg")
import h5py  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402

USAGE = "usage: plot_attention.py FILE.h5 OUT.png"
LAYER_NAME = re.compile(r"^(?:(encoder|decoder|decoder_cross)_)?layer_(\d+)$")
STACK_ORDER = {None: 0, "encoder": 1, "decoder": 2, "decoder_cross": 3}


def fail(message):
    print(f"plot_attention.py: {message}", file=sys.stderr)
    sys.exit(1)


def token_label(token):
    return "SEP" if token == 0 else str(token)


def ints(f, name):
    """An int64 dataset of the file as a list, or None if it is absent."""
    item = f.get(name)
    if not isinstance(item, h5py.Dataset):
        return None
    return [int(t) for t in np.asarray(item[()]).ravel()]


def describe(f):
    """"prompt ... -> answer ..." from the /source, /inputs and /answer datasets."""
    prompt = ints(f, "source")
    if prompt is None:
        inputs = ints(f, "inputs") or []
        prompt = inputs[:inputs.index(0)] if 0 in inputs else inputs
    answer = ints(f, "answer")
    text = "prompt " + " ".join(token_label(t) for t in prompt)
    if answer:
        text += " \u2192 answer " + " ".join(token_label(t) for t in answer)
    return text


def read_layers(path):
    """([(title prefix, weights [H, Tq, Tk], query tokens, key tokens)] in model order,
    a description of the prompt and answer)."""
    try:
        f = h5py.File(path, "r")
    except FileNotFoundError:
        fail(f"{path}: no such file (write one with: gradlab attention --checkpoint CKPT "
             "--input \"...\" --out FILE.h5)")
    except IsADirectoryError:
        fail(f"{path}: is a directory, not an HDF5 file")
    except OSError as e:
        fail(f"{path}: cannot open as HDF5: {e}")
    with f:
        found = []
        for name, item in f.items():
            match = LAYER_NAME.match(name)
            if match and isinstance(item, h5py.Dataset):
                found.append((STACK_ORDER[match.group(1)], int(match.group(2)), match.group(1),
                              name))
        if not found:
            fail(f"{path}: no layer_<i>, encoder_layer_<i>, decoder_layer_<i> or "
                 "decoder_cross_layer_<i> datasets; "
                 "is it a file written by `gradlab attention`?")
        layers = []
        for _, index, stack, name in sorted(found):
            data = f[name]
            if data.ndim != 3:
                fail(f"{path}: dataset {name} has shape {data.shape}, expected [H, Tq, Tk]")
            weights = np.asarray(data[()], dtype=np.float32)
            heads, tq, tk = weights.shape
            queries = [int(t) for t in data.attrs.get("query_tokens", range(tq))]
            keys = [int(t) for t in data.attrs.get("key_tokens", range(tk))]
            if len(queries) != tq or len(keys) != tk:
                fail(f"{path}: dataset {name} is [{heads}, {tq}, {tk}] but has "
                     f"{len(queries)} query and {len(keys)} key tokens")
            prefix = f"{stack.replace('_', ' ')} layer {index}" if stack else f"layer {index}"
            layers.append((prefix, weights, queries, keys))
        return layers, describe(f)


def plot(layers, title, out_path):
    rows = len(layers)
    cols = max(w.shape[0] for _, w, _, _ in layers)
    longest = max(max(w.shape[1], w.shape[2]) for _, w, _, _ in layers)
    cell = min(3.2, max(2.2, 0.14 * longest + 0.4))  # inches per heatmap
    fig, axes = plt.subplots(rows, cols, figsize=(cols * cell + 1.2, rows * (cell + 0.35) + 0.8),
                             squeeze=False, layout="constrained")
    fontsize = 8 if longest <= 12 else 7 if longest <= 24 else 6 if longest <= 40 else 5
    image = None
    for r, (prefix, weights, queries, keys) in enumerate(layers):
        for h in range(cols):
            ax = axes[r][h]
            if h >= weights.shape[0]:
                ax.axis("off")
                continue
            image = ax.imshow(weights[h], cmap="viridis", vmin=0.0, vmax=1.0,
                              interpolation="nearest", aspect="auto")
            ax.set_title(f"{prefix}, head {h}", fontsize=9)
            ax.set_xticks(range(len(keys)))
            ax.set_xticklabels([token_label(t) for t in keys], fontsize=fontsize, rotation=90)
            ax.set_yticks(range(len(queries)))
            ax.set_yticklabels([token_label(t) for t in queries], fontsize=fontsize)
            ax.tick_params(length=0, pad=1)
            if r == rows - 1 or h >= layers[r + 1][1].shape[0]:
                ax.set_xlabel("key token", fontsize=8)
            if h == 0:
                ax.set_ylabel("query token", fontsize=8)
    bar = fig.colorbar(image, ax=axes, fraction=0.025, pad=0.02)
    bar.set_label("attention weight")
    fig.suptitle(title)
    try:
        fig.savefig(out_path, dpi=100, bbox_inches="tight")
    except OSError as e:
        fail(f"{out_path}: cannot write: {e}")
    plt.close(fig)


def main(argv):
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(USAGE)
        print(__doc__.split("\n\n", 2)[2].rstrip())
        return 0
    if len(argv) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    h5_path, out_path = argv[1], argv[2]
    layers, description = read_layers(h5_path)
    plot(layers, f"Attention weights: {description}", out_path)
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
