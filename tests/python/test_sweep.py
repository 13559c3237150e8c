"""gradlab.sweep: the command line's sweep from Python, its results as dicts."""

import pytest

import gradlab

TINY = {"task": "copy", "length": 2, "symbols": 3, "heads": 2, "layers": 1, "d_ff": 8,
        "batch_size": 2, "eval_size": 2, "eval_every": 1, "target_exact_match": 0}


def test_sweep_returns_a_row_per_run_read_from_its_metrics(tmp_path):
    rows = gradlab.sweep(TINY, grid={"lr": [1e-3, 3e-3], "d_model": [8]}, out=tmp_path / "s",
                         seeds=1, jobs=2, steps=2)
    assert [row["name"] for row in rows] == ["lr=0.001,d-model=8,seed=0",
                                             "lr=0.003,d-model=8,seed=0"]
    for row in rows:
        assert row["status"] == "finished" and row["steps"] == 2 and row["seed"] == 0
        assert row["d-model"] == 8 and isinstance(row["lr"], float)
        last = (tmp_path / "s" / row["name"] / "metrics.csv").read_text().splitlines()[-1]
        assert float(last.split(",")[1]) == row["final_train_loss"]
        assert row["best_eval_loss"] <= row["final_eval_loss"]
    # Again over the same directory: nothing to run, the same results.
    assert gradlab.sweep(TINY, grid={"lr": [1e-3, 3e-3], "d_model": [8]}, out=tmp_path / "s",
                         seeds=1, jobs=2, steps=2) == rows


def test_a_bad_grid_is_a_value_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match="'no-such-flag' is not a flag of gradlab train"):
        gradlab.sweep(TINY, grid={"no_such_flag": [1]}, out=tmp_path / "s")
    with pytest.raises(ValueError, match="an empty value"):
        gradlab.sweep(TINY, grid={"lr": []}, out=tmp_path / "s")
    assert not (tmp_path / "s").exists()
