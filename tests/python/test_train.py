"""gradlab.train against `gradlab train`, the callback, and the tasks' batches."""

import numpy as np
import pytest

import gradlab
from conftest import INDUCTION, ROOT


def overrides():
    """conftest's INDUCTION flags past the config file, as keyword settings."""
    flags = INDUCTION[2:]
    return {flags[i][2:]: flags[i + 1] for i in range(0, len(flags), 2)}


def test_python_training_equals_the_command_line_bit_for_bit(runs, tmp_path):
    seen = []
    result = gradlab.train(ROOT / "configs" / "induction.ini", out=tmp_path / "py",
                           callback=lambda step, metrics: seen.append((step, metrics["loss"])),
                           **overrides())
    assert [step for step, _ in seen] == [10, 20, 30] and result["steps"] == 30
    cli, py = runs["root"] / "induction", tmp_path / "py"
    # Every tensor of the checkpoints (the files' bytes differ in HDF5's object times only).
    for name in ("step-000030.h5", "best.h5"):
        ours, theirs = gradlab.load(py / name), gradlab.load(cli / name)
        assert ours.cfg == theirs.cfg
        for param, value in theirs.named_parameters().items():
            assert np.array_equal(ours.named_parameters()[param], value), param
            for slot in ("exp_avg", "exp_avg_sq"):
                item = f"/optimizer/{param}/{slot}"
                assert np.array_equal(gradlab.read_dataset(py / name, item),
                                      gradlab.read_dataset(cli / name, item)), item
    assert (py / "config.ini").read_text() == (cli / "config.ini").read_text()
    timing = {"tokens_per_second", "elapsed_seconds"}
    rows = [[line.split(",") for line in (run / "metrics.csv").read_text().splitlines()]
            for run in (py, cli)]
    keep = [i for i, column in enumerate(rows[1][0]) if column not in timing]
    assert [[r[i] for i in keep] for r in rows[0]] == [[r[i] for i in keep] for r in rows[1]]


def test_callback_returning_false_stops_and_refuses_an_existing_run(tmp_path):
    settings = dict(task="copy", length=4, d_model=16, heads=2, layers=1, d_ff=16, steps=50,
                    eval_every=5, eval_size=8, batch_size=8)
    result = gradlab.train(settings, out=tmp_path / "run", callback=lambda step, m: step < 10)
    assert result["steps"] == 10 and (tmp_path / "run" / "step-000010.h5").exists()
    with pytest.raises(ValueError, match="--overwrite|overwrite"):
        gradlab.train(settings, out=tmp_path / "run")


def test_tasks_give_batches_and_a_heldout_set():
    task = gradlab.tasks.make("copy", length=5, batch_size=4, eval_size=6, seed=1)
    batch = task.batch(1)
    assert batch["tokens"].shape == batch["targets"].shape == batch["loss_mask"].shape
    assert batch["tokens"].shape[0] == 4 and task.heldout()["tokens"].shape[0] == 6
    assert np.array_equal(batch["loss_mask"], batch["targets"] != -100)
    assert np.array_equal(task.batch(1)["tokens"], batch["tokens"])
    assert not np.array_equal(task.batch(2)["tokens"], batch["tokens"])
    assert batch["tokens"].max() < task.vocab_size
