"""Properties of hooks over random token arrays and random hook points (hypothesis): a hook that
returns its input changes nothing bit for bit against one that only reads, and the cache holds
what a hook captures at the same point (with the logits equal bit for bit, but to rounding at a
block's split inputs)."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gradlab

SPLIT_INPUTS = {"hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input",
                "hook_cross_q_input", "hook_cross_k_input", "hook_cross_v_input"}


@pytest.fixture(scope="module")
def model(runs):
    return gradlab.load(runs["induction"])


@st.composite
def tokens_and_point(draw, model):
    points = model.hook_points()
    _, longest, vocab = points["hook_logits"][0]  # [B = 1, T, V] of the longest sequence
    rows = draw(st.integers(1, 3))
    length = draw(st.integers(1, longest))
    ids = draw(st.lists(st.integers(0, vocab - 1), min_size=rows * length,
                        max_size=rows * length))
    point = draw(st.sampled_from(sorted(points)))
    return np.array(ids, dtype=np.int64).reshape(rows, length), point


def test_hooks_are_transparent_and_the_cache_holds_what_a_hook_sees(model):
    @settings(max_examples=12, deadline=None, database=None)
    @given(st.data())
    def check(data):
        tokens, point = data.draw(tokens_and_point(model))
        seen = []
        reading = model.run_with_hooks(
            tokens, fwd_hooks=[(point, lambda a, hook: seen.append(a.copy()))])
        returning = model.run_with_hooks(tokens, fwd_hooks=[(point, lambda a, hook: a)])
        assert np.array_equal(reading, returning), point
        logits, cache = model.run_with_cache(tokens, names_filter=point)
        if point.split(".")[-1] in SPLIT_INPUTS:
            # A hook there runs the block's attention on per-head copies, a cache of the values
            # alone the block as it is (docs/hooks.md, "Split inputs"): equal to rounding.
            np.testing.assert_allclose(logits, reading, rtol=1e-5, atol=1e-5, err_msg=point)
        else:
            assert np.array_equal(logits, reading), point
        assert len(seen) == 1 and seen[0].dtype == cache[point].dtype
        assert np.array_equal(seen[0], cache[point]), point

    check()
