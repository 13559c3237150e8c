"""Tensors and numpy arrays: shared memory, the owner kept alive, clear dtype errors."""

import gc

import numpy as np
import pytest

import gradlab


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tensor_round_trip_shares_the_tensors_memory(dtype):
    a = np.arange(24, dtype=dtype).reshape(2, 3, 4)
    t = gradlab.tensor(a)
    assert t.shape == (2, 3, 4) and t.dtype == np.dtype(dtype).name
    first, second = np.asarray(t), np.asarray(t)
    assert np.array_equal(first, a) and first.dtype == dtype
    assert np.shares_memory(first, second)  # both views of the tensor's one buffer
    first[0, 0, 0] = 7
    assert second[0, 0, 0] == 7


def test_tensor_refuses_other_dtypes():
    with pytest.raises(TypeError, match="float16"):
        gradlab.tensor(np.zeros(3, dtype=np.float16))


def test_a_view_outlives_its_model(runs):
    model = gradlab.load(runs["induction"])
    params = model.named_parameters()
    name = next(iter(params))
    view, expected = params[name], params[name].copy()
    logits, cache = model.run_with_cache(np.arange(1, 9), names_filter="blocks.0.hook_resid_pre")
    resid = cache["blocks.0.hook_resid_pre"]
    del model, params, cache
    gc.collect()
    [gradlab.tensor(np.ones((256, 256), np.float32)) for _ in range(50)]  # reuse freed memory
    assert np.array_equal(view, expected)
    assert np.isfinite(resid).all() and np.isfinite(logits).all()
