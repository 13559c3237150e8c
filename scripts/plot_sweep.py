#!/usr/bin/python3
"""Plots several `gradlab train` runs' held-out token (answer) accuracy against the step, one
line each: a learning-rate sweep, or a model size against another.

    scripts/plot_sweep.py OUT.png "TITLE" LABEL=RUN_DIR/metrics.csv [LABEL=...]

Reads the step and token_accuracy columns of each metrics.csv. Needs matplotlib; renders
without a display.
"""

import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

USAGE = 'usage: plot_sweep.py OUT.png "TITLE" LABEL=RUN_DIR/metrics.csv [LABEL=...]'


def fail(message):
    print(f"plot_sweep.py: {message}", file=sys.stderr)
    sys.exit(1)


def accuracy_curve(path):
    """(steps, token accuracy in percent) of a metrics.csv."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: cannot read: {e}")
    if not rows or "token_accuracy" not in rows[0] or "step" not in rows[0]:
        fail(f"{path}: not a gradlab metrics file with rows (needs step and token_accuracy)")
    try:
        return ([int(r["step"]) for r in rows], [100 * float(r["token_accuracy"]) for r in rows])
    except ValueError as e:
        fail(f"{path}: {e}")


def main(argv):
    if len(argv) < 4 or any("=" not in run for run in argv[3:]):
        print(USAGE, file=sys.stderr)
        return 2
    out_path, title = argv[1], argv[2]
    fig, ax = plt.subplots(figsize=(7, 4))
    for run in argv[3:]:
        label, path = run.split("=", 1)
        steps, accuracy = accuracy_curve(path)
        ax.plot(steps, accuracy, label=label)
    ax.set_title(title)
    ax.set_xlabel("step")
    ax.set_ylabel("held-out answer accuracy (%)")
    ax.set_ylim(-2, 102)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    try:
        fig.savefig(out_path, dpi=100)
    except OSError as e:
        fail(f"{out_path}: cannot write: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
