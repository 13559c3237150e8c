"""The random draws, comparisons and where on gradlab tensors, and gradlab.superposition: a tiny
tms run's geometry, recomputed here from its W, from a path and from a loaded model; a checkpoint
of another task refused."""

import numpy as np
import pytest

import gradlab
from conftest import gradlab as run_gradlab

TMS = ["--task", "tms", "--features", "4", "--instances", "3", "--min-density", "0.1",
       "--model", "tms", "--d-model", "2", "--heads", "1", "--batch-size", "16", "--steps", "10",
       "--eval-every", "10", "--eval-size", "16", "--target-exact-match", "0"]


def test_draws_follow_the_seed_and_their_laws():
    like = gradlab.tensor(np.zeros((200, 50), dtype=np.float32))
    a = np.asarray(gradlab.rand_like(like, gradlab.Generator(3), low=2.0, high=5.0))
    assert a.shape == (200, 50) and a.dtype == np.float32
    assert a.min() >= 2.0 and a.max() < 5.0 and abs(a.mean() - 3.5) < 0.05
    assert np.array_equal(a, np.asarray(gradlab.rand_like(like, gradlab.Generator(3), 2.0, 5.0)))
    assert not np.array_equal(a, np.asarray(gradlab.rand_like(like, gradlab.Generator(4), 2.0,
                                                              5.0)))
    n = np.asarray(gradlab.randn_like(like, gradlab.Generator(1), mean=1.0, stddev=2.0))
    assert abs(n.mean() - 1.0) < 0.1 and abs(n.std() - 2.0) < 0.1

    p = np.tile(np.array([0.0, 0.3, 1.0]), (5000, 1))
    draws = np.asarray(gradlab.bernoulli(gradlab.tensor(p), gradlab.Generator(0)))
    assert draws.dtype == np.float64 and set(np.unique(draws)) <= {0.0, 1.0}
    assert draws[:, 0].sum() == 0 and draws[:, 2].sum() == 5000
    assert abs(draws[:, 1].mean() - 0.3) < 0.02
    with pytest.raises(ValueError, match="1.5"):
        gradlab.bernoulli(gradlab.tensor(np.array([0.5, 1.5])), gradlab.Generator(0))


def test_comparisons_and_where_match_numpy():
    x = np.array([[-1.0, 0.5, 2.0], [0.5, 3.0, -2.0]])
    y = np.array([0.5, 0.5, 3.0])  # broadcast over the rows
    tx, ty = gradlab.tensor(x), gradlab.tensor(y)
    for name, op in [("greater", np.greater), ("greater_equal", np.greater_equal),
                     ("less", np.less), ("less_equal", np.less_equal), ("equal", np.equal),
                     ("not_equal", np.not_equal)]:
        compare = getattr(gradlab, name)
        assert np.array_equal(np.asarray(compare(tx, ty)), op(x, y).astype(np.float64)), name
        assert np.array_equal(np.asarray(compare(tx, 0.5)), op(x, 0.5).astype(np.float64)), name
    picked = gradlab.where(gradlab.greater(tx, 0.0), tx, gradlab.tensor(np.array([10.0])))
    assert np.array_equal(np.asarray(picked), np.where(x > 0, x, 10.0))


def test_superposition_of_a_tms_run_and_the_refusal_of_another_task(tmp_path, runs):
    run_gradlab("train", *TMS, "--out", tmp_path / "tms")
    path = tmp_path / "tms" / "step-000010.h5"
    s = gradlab.superposition(path)
    w = s["weight"]
    assert w.shape == (3, 2, 4)
    assert np.allclose(s["densities"], [1.0, 0.1 ** 0.5, 0.1])
    norms = np.linalg.norm(w, axis=1)  # [I, n]
    assert np.allclose(s["norms"], norms, rtol=1e-6)
    gram = np.einsum("jdi,jdk->jik", w, w).astype(np.float64)  # [I, n, n]
    expected = np.diagonal(gram, axis1=1, axis2=2) ** 2 / (gram ** 2).sum(axis=2)
    assert np.allclose(s["dimensionality"], expected, rtol=1e-5)
    assert np.allclose(s["angles"], np.degrees(np.arctan2(w[:, 1], w[:, 0])) % 360, atol=1e-4)
    loaded = gradlab.superposition(gradlab.load(path))
    assert np.array_equal(loaded["weight"], w)
    with pytest.raises(ValueError, match="a model of task copy, not of tms"):
        gradlab.superposition(runs["seq2seq"])
