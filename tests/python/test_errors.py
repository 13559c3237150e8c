"""Bad inputs get Python's own exception types with the engine's message, never a crash."""

import numpy as np
import pytest

import gradlab


def test_missing_and_damaged_checkpoints(tmp_path):
    missing = tmp_path / "nothing.h5"
    with pytest.raises(FileNotFoundError, match="nothing.h5"):
        gradlab.load(missing)
    damaged = tmp_path / "damaged.h5"
    damaged.write_bytes(b"not an hdf5 file at all")
    with pytest.raises(OSError, match="damaged.h5"):
        gradlab.load(damaged)


def test_bad_tokens(runs):
    model = gradlab.load(runs["induction"])
    with pytest.raises(TypeError, match="integer token ids"):
        model(np.zeros((1, 4), dtype=np.float32))
    with pytest.raises(IndexError, match="outside the vocabulary"):
        model(np.array([[1, 2, 1000]]))
    with pytest.raises(IndexError, match="outside the vocabulary"):
        model(np.array([[1, -1]]))
    with pytest.raises(ValueError, match="empty batch"):
        model(np.zeros((0, 4), dtype=np.int64))
    with pytest.raises(ValueError, match="rank 3"):
        model(np.zeros((1, 2, 3), dtype=np.int64))
    with pytest.raises(ValueError):
        model(np.ones((1, 500), dtype=np.int64))  # past the model's positions
    tokens = np.ones((2, 6), dtype=np.int64)[:, ::2]  # not contiguous: read as it is
    assert model(tokens).shape[:2] == (2, 3)


def test_bad_settings(tmp_path):
    with pytest.raises(KeyError, match="no-such-option"):
        gradlab.train({"no-such-option": 1}, out=tmp_path / "x")
    with pytest.raises(ValueError, match="steps"):
        gradlab.train({"steps": "many"}, out=tmp_path / "y")
