"""Notebook views: the report's attention view, heatmap and training curves (docs/report.md) as
objects a notebook shows inline (_repr_html_). Each object's HTML is self-contained: the
report's own bundle of scripts and style (web/, built with the package) is inlined into it, and
its data enters through the report's one escaping (gradlab._native.embedded_json), so a token
such as "</script>" is shown as text."""

import base64
import json
import math
import os
import pathlib
import uuid

import numpy as np

from gradlab import _native

_WEB = pathlib.Path(__file__).resolve().parent / "web"


def _bundle():
    try:
        return ((_WEB / "report.js").read_text(encoding="utf-8"),
                (_WEB / "report.css").read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise RuntimeError(f"gradlab.vis: the report's bundle is missing ({e.filename}); "
                           "build or install gradlab with its Python package") from e


def _finite(value):
    """value with NaN and infinities as None (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


class View:
    """One view: `kind` names its drawing function in the bundle (GL.views), `data` its JSON."""

    def __init__(self, kind, data):
        self.kind = kind
        self.data = data

    def _repr_html_(self):
        script, style = _bundle()
        box = f"gradlab-view-{uuid.uuid4().hex}"
        data = _native.embedded_json(json.dumps(self.data, allow_nan=False))
        # The bundle runs inside a function whose define, module and exports are undefined, so
        # that Chart.js sets its global even where a notebook has loaded RequireJS.
        return (f'<div class="gradlab" id="{box}"></div>\n<style>\n{style}</style>\n'
                f'<script type="application/json" id="{box}-data">{data}</script>\n'
                f"<script>\n(function (define, module, exports) {{\n{script}\n"
                f'GL.views["{self.kind}"](document.getElementById("{box}"), '
                f'JSON.parse(document.getElementById("{box}-data").textContent));\n'
                "})();\n</script>\n")


def attention(tokens, pattern, name="pattern"):
    """The attention view of one layer's pattern, in the manner of CircuitsVis: a head selector,
    the tokens (hover one: where it attends, what attends to it) and the head's heatmap.
    tokens: [T] strings; pattern: [H, T, T] or [1, H, T, T] (a cache's hook_pattern) or [T, T]."""
    weights = np.array(pattern, dtype=np.float32)
    if weights.ndim == 4 and weights.shape[0] == 1:
        weights = weights[0]
    if weights.ndim == 2:
        weights = weights[None]
    tokens = [str(t) for t in tokens]
    if weights.ndim != 3 or weights.shape[1:] != (len(tokens), len(tokens)):
        raise ValueError(f"gradlab.vis.attention: pattern of shape {list(np.shape(pattern))} for "
                         f"{len(tokens)} tokens; expected [H, {len(tokens)}, {len(tokens)}]")
    heads = weights.shape[0]
    return View("attention", {
        "tokens": {"inputs": tokens},
        "points": [{"name": str(name), "heads": heads, "queries": "inputs", "keys": "inputs",
                    "shape": list(weights.shape),
                    "pattern": base64.b64encode(weights.astype("<f4").tobytes()).decode()}],
    })


def heatmap(values, x_labels, y_labels, title="", diverging=None):
    """A heatmap of values [R, C] (rows y_labels, columns x_labels) with each value on hover;
    NaN cells are left empty. diverging (default: when values has negatives) colours around 0."""
    array = np.array(values, dtype=np.float64)
    x_labels, y_labels = [str(x) for x in x_labels], [str(y) for y in y_labels]
    if array.shape != (len(y_labels), len(x_labels)):
        raise ValueError(f"gradlab.vis.heatmap: values of shape {list(array.shape)} for "
                         f"{len(y_labels)} y labels and {len(x_labels)} x labels")
    if diverging is None:
        diverging = bool(np.nanmin(array) < 0) if array.size else False
    return View("heatmap", {"rows": y_labels, "cols": x_labels, "values": _finite(array.tolist()),
                            "title": str(title), "diverging": bool(diverging)})


def curves(run_dir):
    """A run's training curves, as its report draws them: loss, accuracy and the learning rate
    against the step (with a log-x toggle), from the run directory's metrics.csv."""
    path = os.path.join(os.fspath(run_dir), "metrics.csv")
    columns = json.loads(_native.csv_columns(path))
    if columns is None:
        raise FileNotFoundError(f"gradlab.vis.curves: {path}: no such file (gradlab train "
                                "writes it at each evaluation)")
    return View("curves", {"columns": columns})
