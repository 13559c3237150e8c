"""The Python suite's shared runs: tiny models trained once per session with the command line
(build/gradlab), the binary and package of the build tree (GRADLAB_BUILD, default build/)."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("GRADLAB_BUILD", ROOT / "build")).resolve()
sys.path.insert(0, str(BUILD / "python"))

# A few steps of configs/induction.ini: the attention-only model of the induction example.
INDUCTION = ["--config", str(ROOT / "configs" / "induction.ini"), "--steps", "30",
             "--eval-every", "10", "--eval-size", "64", "--batch-size", "16"]


def gradlab(*args, cwd=None):
    """Runs the command line; its output when it succeeds, an assertion naming it otherwise."""
    done = subprocess.run([str(BUILD / "gradlab"), *map(str, args)], capture_output=True,
                          text=True, cwd=cwd)
    assert done.returncode == 0, f"gradlab {' '.join(map(str, args))}: {done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    text = root / "text.txt"
    text.write_text("the cat sat on the mat; the dog sat on the log.\n" * 20, encoding="utf-8")
    gradlab("train", *INDUCTION, "--out", root / "induction")
    gradlab("train", "--task", "copy", "--model", "seq2seq", "--length", "5", "--d-model", "16",
            "--heads", "2", "--layers", "1", "--d-ff", "32", "--steps", "5", "--eval-every", "5",
            "--eval-size", "16", "--batch-size", "8", "--out", root / "seq2seq")
    gradlab("train", "--task", "text", "--data", text, "--context", "16", "--d-model", "16",
            "--heads", "2", "--layers", "1", "--d-ff", "32", "--steps", "5", "--eval-every", "5",
            "--eval-size", "8", "--batch-size", "8", "--out", root / "text")
    return {name: root / name / "best.h5" for name in ("induction", "seq2seq", "text")} | {
        "root": root}
