#!/usr/bin/python3
"""Plots the metrics.csv of a `gradlab train` run: loss and accuracy against the step.

    scripts/plot_metrics.py RUN_DIR/metrics.csv out.png

The left panel shows train_loss (the loss of the last training batch before each evaluation)
and eval_loss (the held-out loss) on a log scale; the right panel shows the held-out token
accuracy and exact match in percent. metrics.csv has one row per evaluation, with the header

    step,train_loss,eval_loss,token_accuracy,exact_match,grad_norm,lr,tokens_per_second,
    elapsed_seconds,eval_bits_per_token

A run of a task with a finite training set (modular) also has train_accuracy and
train_eval_loss: both panels then show the training set beside the held-out set, against
log-scaled steps (grokking's picture). The held-out losses of a task's parts (induction's
first_copy_loss and second_copy_loss, the columns after those) join the loss panel.
If the run directory also holds config.ini, the title names the task, length and model.
Needs matplotlib; renders without a display.
"""

import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

USAGE = "usage: plot_metrics.py RUN_DIR/metrics.csv OUT.png"
REQUIRED = ("step", "train_loss", "eval_loss", "token_accuracy", "exact_match")
# The columns of a task with a finite training set (modular), scored at every evaluation.
FINITE_TRAINING_SET = ("train_accuracy", "train_eval_loss")


def fail(message):
    print(f"plot_metrics.py: {message}", file=sys.stderr)
    sys.exit(1)


def number(text):
    """A float from a CSV cell; NaN for an empty or unparsable cell."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def read_metrics(path):
    """Columns of metrics.csv as {name: [float, ...]}, rows sorted by step."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [name for name in REQUIRED if name not in header]
            if missing:
                fail(f"{path}: not a gradlab metrics file (missing column(s) "
                     f"{', '.join(missing)}; header is {','.join(header) or 'empty'})")
            rows = [row for row in reader if row.get("step")]
    except FileNotFoundError:
        fail(f"{path}: no such file (a run directory holds metrics.csv after its first "
             "evaluation)")
    except IsADirectoryError:
        fail(f"{path}: is a directory; pass the metrics.csv inside it")
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        fail(f"{path}: cannot read: {e}")
    if not rows:
        fail(f"{path}: has a header but no rows yet (nothing has been evaluated)")
    # A resumed run appends to the same file; keep the last row written for each step.
    by_step = {}
    for row in rows:
        step = number(row["step"])
        if not math.isnan(step):
            by_step[step] = row
    steps = sorted(by_step)
    present = (REQUIRED + tuple(name for name in FINITE_TRAINING_SET if name in header) +
               part_losses(header))
    return {name: [number(by_step[s][name]) if name != "step" else s for s in steps]
            for name in present}


def part_losses(header):
    """The held-out losses of a task's parts: the columns ending in _loss after the fixed ones."""
    fixed = set(REQUIRED + FINITE_TRAINING_SET + ("train_loss", "eval_loss"))
    return tuple(name for name in header if name.endswith("_loss") and name not in fixed)


def positive(steps, values):
    """The (step, value) pairs a log-scale axis can show."""
    pairs = [(s, v) for s, v in zip(steps, values) if v > 0 and math.isfinite(v)]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def plot(metrics, title, out_path, language_model=False):
    steps = metrics["step"]
    marker = "o" if len(steps) <= 40 else None  # few evaluations: show each one
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 4))

    # With a finite training set the result is the gap between it and the held-out set over
    # time (grokking): both sets' loss and accuracy, against log-scaled steps as in the papers.
    finite = "train_accuracy" in metrics
    losses = ((("train_eval_loss", "training set"), ("eval_loss", "held-out")) if finite else
              (("train_loss", "train (last batch)"), ("eval_loss", "held-out")))
    losses += tuple((name, "held-out " + name[:-len("_loss")].replace("_", " "))
                    for name in part_losses(metrics))
    for name, label in losses:
        xs, ys = positive(steps, metrics[name])
        if xs:
            ax_loss.plot(xs, ys, marker=marker, markersize=3, label=label)
    ax_loss.set_yscale("log")
    ax_loss.set_title("Cross-entropy loss")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("loss (log scale)")
    ax_loss.grid(True, which="both", alpha=0.3)
    ax_loss.legend()

    if language_model:  # windows of text are never all right: bits per token instead
        ax_acc.plot(steps, [v / math.log(2) for v in metrics["eval_loss"]], marker=marker,
                    markersize=3, label="held-out")
        ax_acc.set_title("Held-out bits per token")
        ax_acc.set_xlabel("step")
        ax_acc.set_ylabel("bits")
        ax_acc.grid(True, alpha=0.3)
        ax_acc.legend(loc="upper right")
    else:
        accuracies = ((("train_accuracy", "training set"), ("token_accuracy", "held-out")) if finite
                      else (("token_accuracy", "token accuracy"), ("exact_match", "exact match")))
        for name, label in accuracies:
            ax_acc.plot(steps, [100 * v for v in metrics[name]], marker=marker, markersize=3,
                        label=label)
        ax_acc.set_title("Accuracy" if finite else "Held-out accuracy")
        ax_acc.set_xlabel("step")
        ax_acc.set_ylabel("%")
        ax_acc.set_ylim(-2, 102)
        ax_acc.grid(True, alpha=0.3)
        ax_acc.legend(loc="lower right")

    if finite:
        for ax in (ax_loss, ax_acc):
            ax.set_xscale("log")
            ax.set_xlabel("step (log scale)")
    if len(steps) == 1:  # a single evaluation: give the x axis some width around it
        for ax in (ax_loss, ax_acc):
            ax.set_xlim(0, 2 * steps[0])

    fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(out_path, dpi=100)
    except OSError as e:
        fail(f"{out_path}: cannot write: {e}")
    plt.close(fig)


def run_config(csv_path):
    """The config.ini beside metrics.csv as {key: value} (empty if there is none)."""
    config = {}
    try:
        with open(os.path.join(os.path.dirname(os.path.abspath(csv_path)), "config.ini")) as f:
            for line in f:
                key, sep, value = line.partition("=")
                if sep and not key.strip().startswith("#"):
                    config[key.strip()] = value.strip()
    except (OSError, UnicodeDecodeError):
        pass
    return config


def run_title(csv_path, config):
    """"<run dir>: <task>, length <n>, <model>" (or the text file) from its config.ini."""
    run_dir = os.path.dirname(os.path.abspath(csv_path))
    title = f"gradlab run {os.path.basename(run_dir)}"
    if config.get("task") == "text":
        return title + (f": {os.path.basename(config.get('data', ''))}, {config.get('tokenizer')} "
                        f"tokens, context {config.get('context')}")
    if "task" in config:
        title += f": {config['task']}"
        if "length" in config:
            title += f", length {config['length']}"
        if "model" in config:
            title += f", {config['model']} model"
    return title


def main(argv):
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(USAGE)
        print(__doc__.split("\n\n", 2)[2].rstrip())
        return 0
    if len(argv) != 3:
        print(USAGE, file=sys.stderr)
        return 2
    csv_path, out_path = argv[1], argv[2]
    metrics = read_metrics(csv_path)
    config = run_config(csv_path)
    plot(metrics, run_title(csv_path, config), out_path, config.get("task") == "text")
    print(f"wrote {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
