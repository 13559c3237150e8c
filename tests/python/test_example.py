"""examples/python/induction_circuit.py runs on the session's induction checkpoint."""

import os
import subprocess
import sys

from conftest import BUILD, ROOT


def test_induction_circuit_example(runs):
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "python" / "induction_circuit.py"),
         str(runs["induction"])], capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(BUILD / "python")})
    assert done.returncode == 0, done.stderr
    assert "induction head: blocks." in done.stdout
    assert "head knocked out: loss" in done.stdout and "attends to key" in done.stdout
