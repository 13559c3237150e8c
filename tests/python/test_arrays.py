"""Tensors and numpy arrays: shared memory both ways, the owner kept alive, copies where an
array's layout cannot be shared, clear dtype errors."""

import gc
import weakref

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


def aligned(n, dtype):
    """A fresh array of n elements whose data starts on a 64-byte boundary, as a tensor's does."""
    itemsize = np.dtype(dtype).itemsize
    base = np.empty(n + 64 // itemsize, dtype)
    offset = (-base.ctypes.data % 64) // itemsize
    a = base[offset:offset + n]
    a[:] = np.arange(n)  # defined values: uninitialised memory may hold NaN, unequal to itself
    return a


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tensor_shares_an_aligned_arrays_memory_and_keeps_it_alive(dtype):
    a = aligned(12, dtype).reshape(3, 4)
    a[...] = np.arange(12).reshape(3, 4)
    t = gradlab.tensor(a)
    view = np.asarray(t)
    assert np.shares_memory(view, a) and view.dtype == dtype
    a[1, 2] = 42  # numpy's writes are the tensor's values, and the tensor's are numpy's
    view[0, 0] = -1
    assert view[1, 2] == 42 and a[0, 0] == -1
    assert np.shares_memory(np.asarray(gradlab.tensor(a, copy=False)), a)
    expected, array = a.copy(), weakref.ref(a)
    del a, view
    gc.collect()
    assert array() is not None  # the tensor holds it
    [gradlab.tensor(np.ones((64, 64), dtype)) for _ in range(20)]  # reuse freed memory
    assert np.array_equal(np.asarray(t), expected)
    del t
    gc.collect()
    assert array() is None  # released with the last tensor


def read_only():
    a = aligned(8, np.float32)
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("make, reason", [
    (lambda: aligned(24, np.float32).reshape(4, 6)[:, ::2], "it is not C-contiguous"),
    (lambda: aligned(13, np.float32)[1:], "its data is 4 bytes past a 64-byte boundary"),
    (lambda: aligned(13, np.float64)[1:], "its data is 8 bytes past a 64-byte boundary"),
    (read_only, "it is read-only"),
    (lambda: [1.0, 2.5], "it is a list, not a numpy array"),
])
def test_tensor_copies_an_array_it_cannot_share_and_copy_false_says_why(make, reason):
    a = make()
    values = np.asarray(gradlab.tensor(a))
    assert np.array_equal(values, a) and not np.shares_memory(values, np.asarray(a))
    with pytest.raises(ValueError, match=f"^tensor: copy=False, .*: {reason}$"):
        gradlab.tensor(a, copy=False)


def test_tensor_copy_true_copies_even_a_shareable_array():
    a = aligned(8, np.float32)
    a[...] = 3
    values = np.asarray(gradlab.tensor(a, copy=True))
    assert np.array_equal(values, a) and not np.shares_memory(values, a)


@pytest.mark.parametrize("copy", [None, True, False])
def test_tensor_refuses_other_dtypes(copy):
    with pytest.raises(TypeError, match="float16"):
        gradlab.tensor(np.zeros(3, dtype=np.float16), copy=copy)
    with pytest.raises(TypeError, match="int64"):
        gradlab.tensor(aligned(16, np.int64), copy=copy)


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
