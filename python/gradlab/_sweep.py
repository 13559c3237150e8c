"""gradlab.sweep: `gradlab sweep` from Python, its results.csv as a list of dicts. The command
line does the work (the runs are its child processes); this only spells its arguments."""

import csv
import os
import pathlib
import shutil
import signal
import subprocess

from gradlab import _config

# results.csv's columns that are not a grid key's, by type.
_INTEGERS = {"seed", "steps"}
_TEXTS = {"name", "status"}


def _program(program):
    """The gradlab executable: `program`, $GRADLAB_PROGRAM, the build tree's (build/gradlab
    beside build/python/gradlab), or the one on PATH."""
    candidates = [program, os.environ.get("GRADLAB_PROGRAM"),
                  pathlib.Path(__file__).resolve().parents[2] / "gradlab", shutil.which("gradlab")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK) and not os.path.isdir(candidate):
            return os.fspath(candidate)
    raise FileNotFoundError("gradlab.sweep runs the gradlab program, which was not found: pass "
                            "program=PATH or set GRADLAB_PROGRAM")


def _value(text):
    """A grid value as the number it reads as, else the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _row(row):
    out = {}
    for key, text in row.items():
        if key in _TEXTS:
            out[key] = text
        elif text == "":
            out[key] = None
        elif key in _INTEGERS:
            out[key] = int(text)
        else:
            out[key] = _value(text)
    return out


def sweep(config, grid, out, seeds=1, jobs=1, threads=1, extend=False, program=None,
          **settings):
    """Trains every combination of grid's values (a dict: a `gradlab train` key -> its values)
    times `seeds` seeds into run directories under `out`, `jobs` at once, as `gradlab sweep`
    does; config is a config file's path or a dict of settings, and keyword settings are given
    to every run. Run again over the same `out`, it goes on where it stopped (extend=True adds
    values or seeds). Returns results.csv's rows as dicts (numbers as numbers; None where a run
    has no metrics). Raises ValueError for a usage error, RuntimeError when a run fails."""
    args = [_program(program), "sweep", "--out", os.fspath(out), "--seeds", str(seeds),
            "--jobs", str(jobs), "--threads", str(threads)]
    if isinstance(config, (str, os.PathLike)):
        args.append("--config=" + os.fspath(config))
        pairs = []
    else:
        pairs = _config.settings(config)
    pairs += _config.settings(settings)
    args += [f"--{key}={text}" for key, text in pairs]
    for key, values in grid.items():
        name = str(key).replace("_", "-")
        texts = [_config.settings({name: value})[0][1] for value in values]
        args += ["--grid", f"{name}={','.join(texts)}"]
    if extend:
        args.append("--extend")
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as process:
        try:
            _, err = process.communicate()
        except KeyboardInterrupt:
            # The sweep stops its runs cleanly (each saves a checkpoint); run again to go on.
            process.send_signal(signal.SIGINT)
            process.wait()
            raise
    if process.returncode == 2:
        raise ValueError(err.splitlines()[0] if err else "gradlab sweep: a usage error")
    if process.returncode != 0:
        raise RuntimeError(err.strip() or f"gradlab sweep exited {process.returncode}")
    with open(pathlib.Path(out) / "results.csv", newline="", encoding="utf-8") as f:
        return [_row(row) for row in csv.DictReader(f)]
